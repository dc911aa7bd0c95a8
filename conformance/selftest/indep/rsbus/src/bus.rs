//! The daemon: single-threaded poll(2) event loop.

use crate::config::{Config, Limits, Pool};
use crate::json::{self, Value};
use crate::sys::{self, PollFd, POLLERR, POLLHUP, POLLIN, POLLNVAL, POLLOUT};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::unix::io::IntoRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const MAX_CONNECTIONS: usize = 1024;
pub const MAX_SESSIONS: usize = 1024;
pub const MAX_PENDING_REQUESTS: usize = 4096;
pub const MAX_SESSION_ID_LEN: usize = 256;
pub const MAX_REQUEST_ID_LEN: usize = 128;

const READ_CHUNK: usize = 65536;
const BACKOFF_BASE: Duration = Duration::from_millis(100);
const BACKOFF_CAP: Duration = Duration::from_secs(10);

pub enum Listener {
    None,
    Unix(std::os::unix::net::UnixListener, String),
    Tcp(std::net::TcpListener),
}

// ---------------------------------------------------------------- buffers

#[derive(Default)]
struct InBuf {
    buf: Vec<u8>,
    head: usize,
    scan: usize,
}

impl InBuf {
    fn append(&mut self, d: &[u8]) {
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
            self.scan = 0;
        } else if self.head > 65536 && self.head * 2 > self.buf.len() {
            self.buf.drain(..self.head);
            self.scan = self.scan.saturating_sub(self.head);
            self.head = 0;
        }
        self.buf.extend_from_slice(d);
    }
    fn find_nl(&mut self) -> Option<usize> {
        let start = self.scan.max(self.head);
        match self.buf[start..].iter().position(|&b| b == b'\n') {
            Some(p) => {
                self.scan = start + p;
                Some(start + p)
            }
            None => {
                self.scan = self.buf.len();
                None
            }
        }
    }
    fn has_line(&mut self) -> bool {
        self.find_nl().is_some()
    }
    fn next_line(&mut self) -> Option<Vec<u8>> {
        let p = self.find_nl()?;
        let line = self.buf[self.head..p].to_vec();
        self.head = p + 1;
        self.scan = self.head;
        Some(line)
    }
    /// bytes buffered after the last newline
    fn tail_len(&self) -> usize {
        let un = &self.buf[self.head..];
        match un.iter().rposition(|&b| b == b'\n') {
            Some(p) => un.len() - p - 1,
            None => un.len(),
        }
    }
    fn clear(&mut self) {
        self.buf = Vec::new();
        self.head = 0;
        self.scan = 0;
    }
}

#[derive(Default)]
struct OutQ {
    buf: Vec<u8>,
    head: usize,
    full_since: Option<Instant>,
    bp_logged: bool,
    last_release: Option<Instant>,
}

impl OutQ {
    fn len(&self) -> usize {
        self.buf.len() - self.head
    }
    fn is_full(&self, max: usize) -> bool {
        self.len() >= max
    }
    fn push(&mut self, line: &[u8]) {
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
        }
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
    }
    /// Write as much as possible. Err(errno) on a real error.
    fn write_to(&mut self, fd: i32) -> Result<(), i32> {
        while self.len() > 0 {
            let end = (self.head + (1 << 20)).min(self.buf.len());
            match sys::sys_write(fd, &self.buf[self.head..end]) {
                Ok(0) => break,
                Ok(n) => self.head += n,
                Err(e) if e == sys::EAGAIN => break,
                Err(e) => return Err(e),
            }
        }
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
        } else if self.head > (1 << 20) && self.head * 2 > self.buf.len() {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        Ok(())
    }
    fn clear(&mut self) {
        self.buf = Vec::new();
        self.head = 0;
        self.full_since = None;
    }
    /// Track the full/not-full transitions (7.3.1). Logs with `what`.
    fn update_full(&mut self, max: usize, what: &dyn Fn() -> String) {
        let full = self.is_full(max);
        match (full, self.full_since.is_some()) {
            (true, false) => {
                let now = Instant::now();
                self.full_since = Some(now);
                // a queue that keeps flipping (one message larger than the
                // limit at a time) is reported once, not per message
                if self.last_release.map(|t| now.duration_since(t) >= Duration::from_secs(1)).unwrap_or(true) {
                    self.bp_logged = true;
                    warn!("output queue of {} is full ({} bytes >= max_output_queue {}); applying backpressure", what(), self.len(), max);
                } else {
                    debug!("output queue of {} is full again ({} bytes)", what(), self.len());
                }
            }
            (false, true) => {
                self.full_since = None;
                self.last_release = Some(Instant::now());
                if self.bp_logged {
                    self.bp_logged = false;
                    info!("output queue of {} drained below max_output_queue ({} bytes); releasing backpressure", what(), self.len());
                } else {
                    debug!("output queue of {} below max_output_queue again", what());
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------- messages

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum IdKey {
    Str(String),
    Num(String),
}

impl std::fmt::Display for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdKey::Str(s) => write!(f, "{:?}", s),
            IdKey::Num(n) => write!(f, "{}", n),
        }
    }
}

struct ClientMsg {
    line: Vec<u8>,
    id: Option<IdKey>,
    sid: Option<String>,
    method: Option<String>,
    is_request: bool,
}

enum WKind {
    Response(IdKey),
    Session(String),
    Unroutable(String),
}

struct WorkerMsg {
    line: Vec<u8>,
    kind: WKind,
}

fn id_key(v: &Value) -> Result<Option<IdKey>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Str(s) => {
            if s.len() > MAX_REQUEST_ID_LEN {
                Err(format!("id string longer than {} bytes", MAX_REQUEST_ID_LEN))
            } else {
                Ok(Some(IdKey::Str(s.clone())))
            }
        }
        Value::Num(n) => {
            if n.len() > MAX_REQUEST_ID_LEN {
                Err(format!("numeric id longer than {} characters", MAX_REQUEST_ID_LEN))
            } else {
                Ok(Some(IdKey::Num(n.clone())))
            }
        }
        o => Err(format!("id must be a string or number, got {}", o.type_name())),
    }
}

fn session_key(v: &Value) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Str(s) => {
            if s.len() > MAX_SESSION_ID_LEN {
                Err(format!("sessionId longer than {} bytes", MAX_SESSION_ID_LEN))
            } else {
                Ok(Some(s.clone()))
            }
        }
        o => Err(format!("sessionId must be a string, got {}", o.type_name())),
    }
}

fn build_client_msg(line: Vec<u8>, top: &json::Top) -> Result<ClientMsg, String> {
    if !top.is_object {
        return Err("message is not a JSON object".into());
    }
    let id = match &top.id {
        Some(v) => id_key(v)?,
        None => None,
    };
    let sid = match &top.session_id {
        Some(v) => session_key(v)?,
        None => None,
    };
    let method = match &top.method {
        None | Some(Value::Null) => None,
        Some(Value::Str(s)) => Some(s.clone()),
        Some(o) => return Err(format!("method must be a string, got {}", o.type_name())),
    };
    let is_request = id.is_some() && !top.has_result && !top.has_error;
    Ok(ClientMsg { line, id, sid, method, is_request })
}

fn build_worker_msg(line: Vec<u8>, top: &json::Top) -> WorkerMsg {
    let kind = if !top.is_object {
        WKind::Unroutable("message is not a JSON object".into())
    } else if top.has_result || top.has_error {
        match top.id.as_ref().map(id_key) {
            Some(Ok(Some(k))) => WKind::Response(k),
            Some(Err(e)) => WKind::Unroutable(format!("response with unusable id: {}", e)),
            _ => WKind::Unroutable("response without id".into()),
        }
    } else {
        match top.session_id.as_ref().map(session_key) {
            Some(Ok(Some(s))) => WKind::Session(s),
            Some(Err(e)) => WKind::Unroutable(format!("unusable sessionId: {}", e)),
            _ => WKind::Unroutable("neither a response (id with result/error) nor a message with sessionId".into()),
        }
    };
    WorkerMsg { line, kind }
}

fn preview(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
    if line.len() > 120 {
        format!("{}...", s)
    } else {
        s
    }
}

// ---------------------------------------------------------------- entities

#[derive(Clone, Copy, PartialEq, Debug)]
enum WState {
    Starting,
    Running,
    Stopping,
    Stopped,
}

struct Worker {
    wid: usize,
    pool: usize,
    state: WState,
    pid: i32,
    in_fd: i32,
    out_fd: i32,
    inb: InBuf,
    outq: OutQ,
    parked: Option<WorkerMsg>,
    restarts: VecDeque<Instant>,
    restart_at: Option<Instant>,
    kill_at: Option<Instant>,
    gave_up: bool,
    exited: bool,
    draining: bool,
}

struct Client {
    cid: u64,
    rfd: i32,
    wfd: i32,
    stdio: bool,
    desc: String,
    inb: InBuf,
    outq: OutQ,
    parked: Option<ClientMsg>,
    read_eof: bool,
    linger_deadline: Option<Instant>,
}

struct Session {
    worker: usize,
    owner: u64,
}

#[derive(Clone, Copy)]
enum Tag {
    Sig,
    Listen,
    ClientR(u64, i32),
    ClientW(u64, i32),
    WorkerR(usize, i32),
    WorkerW(usize, i32),
}

pub struct Bus {
    limits: Limits,
    pools: Vec<Pool>,
    workers: Vec<Worker>,
    clients: BTreeMap<u64, Client>,
    next_cid: u64,
    sessions: HashMap<String, Session>,
    pending: HashMap<(usize, IdKey), VecDeque<u64>>,
    pending_count: usize,
    pending_full_warned: Option<Instant>,
    rr: usize,
    listener: Listener,
    listener_pause_until: Option<Instant>,
    sigfd: i32,
    term_seen: usize,
    shutting_down: bool,
    shutdown_deadline: Option<Instant>,
    killed_all: bool,
    exit_code: i32,
    stdio_eof_deadline: Option<Instant>,
    stdio_saved_fl: Option<(i32, i32)>,
}

impl Bus {
    pub fn new(cfg: Config, listener: Listener, stdio: bool, sigfd: i32) -> Bus {
        let mut workers = Vec::new();
        for (pi, p) in cfg.pools.iter().enumerate() {
            for _ in 0..p.instances {
                let wid = workers.len();
                workers.push(Worker {
                    wid,
                    pool: pi,
                    state: WState::Stopped,
                    pid: 0,
                    in_fd: -1,
                    out_fd: -1,
                    inb: InBuf::default(),
                    outq: OutQ::default(),
                    parked: None,
                    restarts: VecDeque::new(),
                    restart_at: None,
                    kill_at: None,
                    gave_up: false,
                    exited: false,
                    draining: false,
                });
            }
        }
        let mut bus = Bus {
            limits: cfg.limits,
            pools: cfg.pools,
            workers,
            clients: BTreeMap::new(),
            next_cid: 1,
            sessions: HashMap::new(),
            pending: HashMap::new(),
            pending_count: 0,
            pending_full_warned: None,
            rr: 0,
            listener,
            listener_pause_until: None,
            sigfd,
            term_seen: 0,
            shutting_down: false,
            shutdown_deadline: None,
            killed_all: false,
            exit_code: 0,
            stdio_eof_deadline: None,
            stdio_saved_fl: None,
        };
        if stdio {
            let f0 = sys::get_fl(0);
            let f1 = sys::get_fl(1);
            bus.stdio_saved_fl = Some((f0, f1));
            sys::set_nonblock(0);
            sys::set_nonblock(1);
            let cid = bus.alloc_cid();
            bus.clients.insert(
                cid,
                Client {
                    cid,
                    rfd: 0,
                    wfd: 1,
                    stdio: true,
                    desc: format!("client#{} (stdio)", cid),
                    inb: InBuf::default(),
                    outq: OutQ::default(),
                    parked: None,
                    read_eof: false,
                    linger_deadline: None,
                },
            );
        }
        bus
    }

    fn alloc_cid(&mut self) -> u64 {
        let c = self.next_cid;
        self.next_cid += 1;
        c
    }

    fn wdesc(&self, wid: usize) -> String {
        let w = &self.workers[wid];
        format!("worker {} (pool '{}', pid {})", wid, self.pools[w.pool].id, w.pid)
    }

    fn cdesc(&self, cid: u64) -> String {
        match self.clients.get(&cid) {
            Some(c) => c.desc.clone(),
            None => format!("client#{}", cid),
        }
    }

    // ------------------------------------------------------------ workers

    fn spawn_worker(&mut self, wid: usize) {
        let pool = self.pools[self.workers[wid].pool].clone();
        self.workers[wid].state = WState::Starting;
        let res = Command::new(&pool.command)
            .args(&pool.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn();
        match res {
            Ok(mut child) => {
                let pid = child.id() as i32;
                let in_fd = child.stdin.take().map(|s| s.into_raw_fd()).unwrap_or(-1);
                let out_fd = child.stdout.take().map(|s| s.into_raw_fd()).unwrap_or(-1);
                drop(child); // reaped via waitpid(-1)
                sys::set_nonblock(in_fd);
                sys::set_nonblock(out_fd);
                let w = &mut self.workers[wid];
                w.pid = pid;
                w.in_fd = in_fd;
                w.out_fd = out_fd;
                w.inb.clear();
                w.outq.clear();
                w.parked = None;
                w.exited = false;
                w.draining = false;
                w.kill_at = None;
                w.state = WState::Running;
                info!("{} started: {} {:?}", self.wdesc(wid), pool.command, pool.args);
            }
            Err(e) => {
                error!("failed to spawn worker {} (pool '{}', command '{}'): {}", wid, pool.id, pool.command, e);
                self.workers[wid].state = WState::Stopped;
                self.workers[wid].pid = 0;
                if !self.shutting_down {
                    self.schedule_restart(wid);
                }
            }
        }
    }

    fn schedule_restart(&mut self, wid: usize) {
        let now = Instant::now();
        let window = self.limits.restart_window;
        let max = self.limits.max_restarts;
        let w = &mut self.workers[wid];
        while let Some(&t) = w.restarts.front() {
            if now.duration_since(t) >= window {
                w.restarts.pop_front();
            } else {
                break;
            }
        }
        if w.restarts.len() >= max {
            w.gave_up = true;
            w.restart_at = None;
            error!(
                "worker {} (pool '{}') exceeded max_restarts ({} within {}s); not restarting",
                wid,
                self.pools[w.pool].id,
                max,
                window.as_secs_f64()
            );
            return;
        }
        let k = w.restarts.len().min(20) as u32;
        let delay = BACKOFF_BASE.checked_mul(1u32 << k).unwrap_or(BACKOFF_CAP).min(BACKOFF_CAP);
        w.restarts.push_back(now);
        w.restart_at = Some(now + delay);
        info!(
            "worker {} (pool '{}') will be restarted in {} ms (restart {} of max {} within {}s)",
            wid,
            self.pools[w.pool].id,
            delay.as_millis(),
            w.restarts.len(),
            max,
            window.as_secs_f64()
        );
    }

    fn worker_accepting(&self, wid: usize) -> bool {
        let w = &self.workers[wid];
        w.state == WState::Running && w.in_fd >= 0
    }

    fn any_worker_can_run(&self) -> bool {
        !self.shutting_down
            && self.workers.iter().any(|w| match w.state {
                WState::Running | WState::Starting => true,
                _ => !w.gave_up,
            })
    }

    fn rr_peek(&self) -> Option<usize> {
        let n = self.workers.len();
        (0..n).map(|k| (self.rr + k) % n).find(|&w| self.worker_accepting(w))
    }

    fn invalidate_worker_sessions(&mut self, wid: usize) {
        let before = self.sessions.len();
        self.sessions.retain(|_, s| s.worker != wid);
        let n = before - self.sessions.len();
        if n > 0 {
            info!("invalidated {} session(s) bound to worker {}", n, wid);
        }
    }

    fn discard_worker_pending(&mut self, wid: usize) {
        let keys: Vec<(usize, IdKey)> = self.pending.keys().filter(|k| k.0 == wid).cloned().collect();
        for k in keys {
            if let Some(q) = self.pending.remove(&k) {
                for cid in q {
                    self.pending_count -= 1;
                    warn!("discarding pending request id {} from {} (worker {} is gone)", k.1, self.cdesc(cid), wid);
                }
            }
        }
    }

    /// Daemon-initiated termination of a misbehaving worker (5.3, 7.3).
    fn terminate_worker(&mut self, wid: usize, reason: &str) {
        error!("{}: {}; terminating it", self.wdesc(wid), reason);
        self.invalidate_worker_sessions(wid);
        self.discard_worker_pending(wid);
        let drain = self.limits.drain_timeout;
        let w = &mut self.workers[wid];
        sys::sys_close(w.in_fd);
        sys::sys_close(w.out_fd);
        w.in_fd = -1;
        w.out_fd = -1;
        w.inb.clear();
        w.outq.clear();
        w.parked = None;
        if w.state == WState::Running && !w.exited {
            sys::sys_kill(w.pid, sys::SIGTERM);
            w.state = WState::Stopping;
            w.kill_at = Some(Instant::now() + drain);
        }
    }

    fn on_worker_exit(&mut self, wid: usize, status: i32) {
        let desc = self.wdesc(wid);
        let expected = self.shutting_down || self.workers[wid].state == WState::Stopping;
        if expected {
            info!("{} exited ({})", desc, sys::describe_status(status));
        } else {
            warn!("{} exited unexpectedly ({})", desc, sys::describe_status(status));
        }
        self.workers[wid].exited = true;
        // Forward whatever it wrote before exiting.
        if self.workers[wid].out_fd >= 0 {
            let fd = self.workers[wid].out_fd;
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                match sys::sys_read(fd, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => self.workers[wid].inb.append(&buf[..n]),
                }
                if self.workers[wid].inb.tail_len() > self.limits.max_input_buffer {
                    break;
                }
            }
            let w = &mut self.workers[wid];
            if w.inb.tail_len() > 0 && w.inb.tail_len() <= self.limits.max_input_buffer {
                w.inb.append(b"\n");
            }
            w.draining = true;
            self.process_worker(wid);
            self.workers[wid].draining = false;
        }
        let w = &mut self.workers[wid];
        sys::sys_close(w.in_fd);
        sys::sys_close(w.out_fd);
        w.in_fd = -1;
        w.out_fd = -1;
        w.inb.clear();
        w.outq.clear();
        w.parked = None;
        w.state = WState::Stopped;
        w.kill_at = None;
        w.pid = 0;
        self.invalidate_worker_sessions(wid);
        self.discard_worker_pending(wid);
        if !self.shutting_down {
            self.schedule_restart(wid);
        }
    }

    fn reap(&mut self) {
        sys::CHLD.store(false, std::sync::atomic::Ordering::SeqCst);
        while let Some((pid, st)) = sys::reap_any() {
            if let Some(wid) = self.workers.iter().position(|w| w.pid == pid && w.state != WState::Stopped) {
                self.on_worker_exit(wid, st);
            } else {
                debug!("reaped unknown child pid {} ({})", pid, sys::describe_status(st));
            }
        }
    }

    // ------------------------------------------------------------ clients

    fn pending_of_client(&self, cid: u64) -> usize {
        self.pending.values().map(|q| q.iter().filter(|&&c| c == cid).count()).sum()
    }

    fn close_client(&mut self, cid: u64, reason: &str, is_error: bool) {
        let mut c = match self.clients.remove(&cid) {
            Some(c) => c,
            None => return,
        };
        if is_error {
            let _ = c.outq.write_to(c.wfd);
            error!("closing {}: {}", c.desc, reason);
        } else {
            info!("{} disconnected ({})", c.desc, reason);
        }
        if !c.stdio {
            sys::sys_close(c.rfd);
        }
        let before = self.sessions.len();
        self.sessions.retain(|_, s| s.owner != cid);
        let ns = before - self.sessions.len();
        if ns > 0 {
            info!("invalidated {} session(s) owned by {}", ns, c.desc);
        }
        let mut np = 0;
        self.pending.retain(|k, q| {
            let b = q.len();
            q.retain(|&x| x != cid);
            let d = b - q.len();
            if d > 0 {
                debug!("discarding pending request id {} of {}", k.1, c.desc);
            }
            np += d;
            !q.is_empty()
        });
        self.pending_count -= np;
        if np > 0 {
            warn!("discarded {} pending request(s) of {}", np, c.desc);
        }
        if c.stdio && !self.shutting_down {
            self.begin_shutdown(if is_error { 1 } else { 0 }, "stdio client closed");
        }
    }

    fn on_client_eof(&mut self, cid: u64, hup: bool) {
        let drain = self.limits.drain_timeout;
        let max_in = self.limits.max_input_buffer;
        let stdio;
        {
            let c = match self.clients.get_mut(&cid) {
                Some(c) => c,
                None => return,
            };
            c.read_eof = true;
            stdio = c.stdio;
            let t = c.inb.tail_len();
            if t > 0 && t <= max_in {
                c.inb.append(b"\n");
            }
        }
        self.process_client(cid);
        if !self.clients.contains_key(&cid) {
            return;
        }
        if stdio {
            info!("stdin closed (EOF); draining pending requests before shutdown");
            self.stdio_eof_deadline = Some(Instant::now() + drain);
        } else if hup {
            self.close_client(cid, "connection closed by peer", false);
        } else {
            debug!("{} half-closed its connection", self.cdesc(cid));
            if let Some(c) = self.clients.get_mut(&cid) {
                c.linger_deadline = Some(Instant::now() + drain);
            }
        }
    }

    /// Process buffered lines of a client until blocked or empty.
    fn process_client(&mut self, cid: u64) {
        let max_in = self.limits.max_input_buffer;
        loop {
            if self.shutting_down {
                return;
            }
            let c = match self.clients.get_mut(&cid) {
                Some(c) => c,
                None => return,
            };
            if let Some(p) = c.parked.take() {
                if let Some(p) = self.deliver_client_msg(cid, p) {
                    if let Some(c) = self.clients.get_mut(&cid) {
                        c.parked = Some(p);
                    }
                    return;
                }
                continue;
            }
            let line = match c.inb.next_line() {
                Some(l) => l,
                None => return,
            };
            if line.len() > max_in {
                let d = c.desc.clone();
                self.close_client(cid, &format!("input buffer overflow on {}: line of {} bytes exceeds max_input_buffer {}", d, line.len(), max_in), true);
                return;
            }
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let top = match json::scan_message(&line) {
                Ok(t) => t,
                Err(e) => {
                    error!("malformed JSON from {}: {}: {}", self.cdesc(cid), e, preview(&line));
                    self.close_client(cid, "malformed JSON input", true);
                    return;
                }
            };
            let msg = match build_client_msg(line, &top) {
                Ok(m) => m,
                Err(e) => {
                    warn!("cannot extract routing fields from message of {}: {}", self.cdesc(cid), e);
                    self.close_client(cid, "routing fields cannot be extracted", true);
                    return;
                }
            };
            if let Some(p) = self.deliver_client_msg(cid, msg) {
                if let Some(c) = self.clients.get_mut(&cid) {
                    c.parked = Some(p);
                }
                return;
            }
        }
    }

    /// Route one client message. Returns Some(msg) if it must wait.
    fn deliver_client_msg(&mut self, cid: u64, msg: ClientMsg) -> Option<ClientMsg> {
        let (target, new_session) = match &msg.sid {
            Some(sid) => match self.sessions.get(sid) {
                Some(s) => (Some(s.worker), false),
                None => (self.rr_peek(), true),
            },
            None => (self.rr_peek(), false),
        };
        let target = match target {
            Some(t) => t,
            None => {
                if self.any_worker_can_run() {
                    return Some(msg);
                }
                warn!("no worker available for message from {}; discarding: {}", self.cdesc(cid), preview(&msg.line));
                return None;
            }
        };
        if !self.worker_accepting(target) {
            warn!("worker {} of session {:?} is not accepting input; discarding message from {}", target, msg.sid, self.cdesc(cid));
            return None;
        }
        if new_session && self.sessions.len() >= MAX_SESSIONS {
            warn!("session table full ({} sessions); discarding message from {} for new session {:?}", MAX_SESSIONS, self.cdesc(cid), msg.sid);
            return None;
        }
        if msg.is_request && self.pending_count >= MAX_PENDING_REQUESTS {
            // treated as backpressure: the client waits until a slot frees
            let now = Instant::now();
            if self.pending_full_warned.map(|t| now.duration_since(t) >= Duration::from_secs(5)).unwrap_or(true) {
                self.pending_full_warned = Some(now);
                warn!("pending request table full ({} requests); pausing clients that send requests", MAX_PENDING_REQUESTS);
            }
            return Some(msg);
        }
        let max_out = self.limits.max_output_queue;
        if self.workers[target].outq.is_full(max_out) {
            return Some(msg);
        }
        // commit
        let wd = self.wdesc(target);
        {
            let w = &mut self.workers[target];
            w.outq.push(&msg.line);
            w.outq.update_full(max_out, &|| wd.clone());
        }
        if new_session {
            let sid = msg.sid.clone().unwrap();
            debug!("new session {:?} -> worker {} (owner {})", sid, target, self.cdesc(cid));
            self.sessions.insert(sid, Session { worker: target, owner: cid });
        }
        if msg.sid.is_none() || new_session {
            self.rr = (target + 1) % self.workers.len();
        }
        if msg.is_request {
            let id = msg.id.clone().unwrap();
            self.pending.entry((target, id)).or_default().push_back(cid);
            self.pending_count += 1;
        }
        debug!(
            "routed {} from {} to worker {} (id {:?}, sessionId {:?})",
            msg.method.as_deref().unwrap_or("message"),
            self.cdesc(cid),
            target,
            msg.id.as_ref().map(|i| i.to_string()),
            msg.sid
        );
        None
    }

    // ------------------------------------------------------------ worker output

    fn process_worker(&mut self, wid: usize) {
        let max_in = self.limits.max_input_buffer;
        loop {
            let w = &mut self.workers[wid];
            if let Some(p) = w.parked.take() {
                if let Some(p) = self.deliver_worker_msg(wid, p) {
                    self.workers[wid].parked = Some(p);
                    return;
                }
                continue;
            }
            let line = match w.inb.next_line() {
                Some(l) => l,
                None => return,
            };
            if line.len() > max_in {
                self.terminate_worker(wid, &format!("input buffer overflow: line of {} bytes exceeds max_input_buffer {}", line.len(), max_in));
                return;
            }
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let top = match json::scan_message(&line) {
                Ok(t) => t,
                Err(e) => {
                    self.terminate_worker(wid, &format!("malformed JSON on stdout ({}): {}", e, preview(&line)));
                    return;
                }
            };
            let msg = build_worker_msg(line, &top);
            if let Some(p) = self.deliver_worker_msg(wid, msg) {
                self.workers[wid].parked = Some(p);
                return;
            }
        }
    }

    fn deliver_worker_msg(&mut self, wid: usize, msg: WorkerMsg) -> Option<WorkerMsg> {
        let cid = match &msg.kind {
            WKind::Response(id) => match self.pending.get(&(wid, id.clone())).and_then(|q| q.front()) {
                Some(&c) => c,
                None => {
                    warn!("response id {} from worker {} not found in pending request table; discarding", id, wid);
                    return None;
                }
            },
            WKind::Session(sid) => match self.sessions.get(sid) {
                Some(s) => s.owner,
                None => {
                    warn!("message from worker {} for unknown session {:?}; discarding: {}", wid, sid, preview(&msg.line));
                    return None;
                }
            },
            WKind::Unroutable(why) => {
                warn!("unroutable message from worker {} ({}); discarding: {}", wid, why, preview(&msg.line));
                return None;
            }
        };
        let max_out = self.limits.max_output_queue;
        let force = self.workers[wid].draining;
        let c = match self.clients.get_mut(&cid) {
            Some(c) => c,
            None => {
                warn!("client#{} of message from worker {} is gone; discarding", cid, wid);
                return None;
            }
        };
        if !force && c.outq.is_full(max_out) {
            return Some(msg);
        }
        c.outq.push(&msg.line);
        let d = c.desc.clone();
        c.outq.update_full(max_out, &|| d.clone());
        if let WKind::Response(id) = &msg.kind {
            let key = (wid, id.clone());
            if let Some(q) = self.pending.get_mut(&key) {
                q.pop_front();
                self.pending_count -= 1;
                if q.is_empty() {
                    self.pending.remove(&key);
                }
            }
        }
        debug!("forwarded message from worker {} to {}", wid, d);
        None
    }

    // ------------------------------------------------------------ shutdown

    fn begin_shutdown(&mut self, code: i32, why: &str) {
        if self.shutting_down {
            return;
        }
        info!("shutting down ({})", why);
        self.shutting_down = true;
        if code != 0 {
            self.exit_code = code;
        }
        self.close_listener();
        let now = Instant::now();
        for wid in 0..self.workers.len() {
            self.workers[wid].restart_at = None;
            if self.workers[wid].state == WState::Running {
                info!("sending SIGTERM to {}", self.wdesc(wid));
                sys::sys_kill(self.workers[wid].pid, sys::SIGTERM);
                self.workers[wid].state = WState::Stopping;
                self.workers[wid].kill_at = None;
            }
        }
        self.shutdown_deadline = Some(now + self.limits.drain_timeout);
    }

    fn close_listener(&mut self) {
        match std::mem::replace(&mut self.listener, Listener::None) {
            Listener::Unix(l, path) => {
                drop(l);
                let _ = std::fs::remove_file(&path);
                info!("closed listening socket {}", path);
            }
            Listener::Tcp(l) => {
                drop(l);
                info!("closed listening socket");
            }
            Listener::None => {}
        }
    }

    fn kill_remaining(&mut self) {
        for wid in 0..self.workers.len() {
            let st = self.workers[wid].state;
            if st == WState::Stopping || st == WState::Running {
                warn!("{} did not exit in time; sending SIGKILL", self.wdesc(wid));
                let pid = self.workers[wid].pid;
                sys::sys_kill(pid, sys::SIGKILL);
                if let Some(status) = sys::wait_pid(pid) {
                    self.on_worker_exit(wid, status);
                } else {
                    self.workers[wid].state = WState::Stopped;
                }
            }
        }
        self.killed_all = true;
    }

    fn all_workers_stopped(&self) -> bool {
        self.workers.iter().all(|w| w.state == WState::Stopped)
    }

    fn final_flush(&mut self) {
        let deadline = Instant::now() + self.limits.drain_timeout;
        loop {
            let ids: Vec<(u64, i32)> = self.clients.values().filter(|c| c.outq.len() > 0 && c.wfd >= 0).map(|c| (c.cid, c.wfd)).collect();
            if ids.is_empty() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                warn!("drain timeout while flushing client output; dropping remaining output");
                break;
            }
            let mut pfds: Vec<PollFd> = ids.iter().map(|&(_, fd)| PollFd { fd, events: POLLOUT, revents: 0 }).collect();
            let ms = (deadline - now).as_millis().min(1000) as i32 + 1;
            sys::sys_poll(&mut pfds, ms);
            for (i, &(cid, fd)) in ids.iter().enumerate() {
                if pfds[i].revents != 0 {
                    let c = self.clients.get_mut(&cid).unwrap();
                    if c.outq.write_to(fd).is_err() {
                        c.outq.clear();
                    }
                }
            }
        }
        let cids: Vec<u64> = self.clients.keys().cloned().collect();
        for cid in cids {
            let c = self.clients.remove(&cid).unwrap();
            if !c.stdio {
                sys::sys_close(c.rfd);
            }
        }
        if let Some((f0, f1)) = self.stdio_saved_fl {
            if f0 >= 0 {
                sys::set_fl(0, f0);
            }
            if f1 >= 0 {
                sys::set_fl(1, f1);
            }
        }
    }

    // ------------------------------------------------------------ main loop

    fn handle_signals(&mut self) {
        let n = sys::TERM_COUNT.load(std::sync::atomic::Ordering::SeqCst);
        if n > self.term_seen {
            let sig = sys::LAST_TERM_SIG.load(std::sync::atomic::Ordering::SeqCst);
            let name = if sig == sys::SIGINT { "SIGINT" } else { "SIGTERM" };
            if !self.shutting_down {
                self.begin_shutdown(0, &format!("received {}", name));
            } else if n > self.term_seen && !self.killed_all {
                info!("received {} again during shutdown; killing workers now", name);
                self.kill_remaining();
            }
            self.term_seen = n;
        }
    }

    fn accept_clients(&mut self) {
        loop {
            let res: std::io::Result<(i32, String)> = match &self.listener {
                Listener::Unix(l, _) => l.accept().and_then(|(s, _)| {
                    s.set_nonblocking(true)?;
                    Ok((s.into_raw_fd(), "unix".to_string()))
                }),
                Listener::Tcp(l) => l.accept().and_then(|(s, a)| {
                    s.set_nonblocking(true)?;
                    let _ = s.set_nodelay(true);
                    Ok((s.into_raw_fd(), a.to_string()))
                }),
                Listener::None => return,
            };
            match res {
                Ok((fd, peer)) => {
                    let open = 6 + self.clients.len() + self.workers.iter().map(|w| (w.in_fd >= 0) as usize + (w.out_fd >= 0) as usize).sum::<usize>();
                    if open >= MAX_CONNECTIONS {
                        warn!("connection limit reached ({} file descriptors); rejecting connection from {}", MAX_CONNECTIONS, peer);
                        sys::sys_close(fd);
                        continue;
                    }
                    let cid = self.alloc_cid();
                    let desc = format!("client#{} (fd {}, {})", cid, fd, peer);
                    info!("{} connected", desc);
                    self.clients.insert(
                        cid,
                        Client {
                            cid,
                            rfd: fd,
                            wfd: fd,
                            stdio: false,
                            desc,
                            inb: InBuf::default(),
                            outq: OutQ::default(),
                            parked: None,
                            read_eof: false,
                            linger_deadline: None,
                        },
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    error!("accept failed: {}", e);
                    self.listener_pause_until = Some(Instant::now() + Duration::from_millis(100));
                    return;
                }
            }
        }
    }

    fn read_client(&mut self, cid: u64, hup: bool) {
        let max_in = self.limits.max_input_buffer;
        let fd = match self.clients.get(&cid) {
            Some(c) => c.rfd,
            None => return,
        };
        let mut buf = vec![0u8; READ_CHUNK];
        match sys::sys_read(fd, &mut buf) {
            Ok(0) => self.on_client_eof(cid, hup),
            Ok(n) => {
                let c = self.clients.get_mut(&cid).unwrap();
                c.inb.append(&buf[..n]);
                let t = c.inb.tail_len();
                if t > max_in {
                    let d = c.desc.clone();
                    self.close_client(cid, &format!("input buffer overflow on {}: {} bytes without newline exceed max_input_buffer {}", d, t, max_in), true);
                    return;
                }
                self.process_client(cid);
            }
            Err(e) if e == sys::EAGAIN => {}
            Err(e) => {
                if self.clients.get(&cid).map(|c| c.stdio).unwrap_or(false) {
                    self.close_client(cid, &format!("read error on stdin (errno {})", e), true);
                } else {
                    self.close_client(cid, &format!("read error (errno {})", e), false);
                }
            }
        }
    }

    fn write_client(&mut self, cid: u64) {
        let max_out = self.limits.max_output_queue;
        let c = match self.clients.get_mut(&cid) {
            Some(c) => c,
            None => return,
        };
        match c.outq.write_to(c.wfd) {
            Ok(()) => {
                let d = c.desc.clone();
                c.outq.update_full(max_out, &|| d.clone());
            }
            Err(e) => {
                let stdio = c.stdio;
                c.outq.clear();
                self.close_client(cid, &format!("write error (errno {})", e), stdio);
            }
        }
    }

    fn read_worker(&mut self, wid: usize) {
        let max_in = self.limits.max_input_buffer;
        let fd = self.workers[wid].out_fd;
        if fd < 0 {
            return;
        }
        let mut buf = vec![0u8; READ_CHUNK];
        match sys::sys_read(fd, &mut buf) {
            Ok(0) => {
                debug!("{} closed its stdout", self.wdesc(wid));
                let w = &mut self.workers[wid];
                sys::sys_close(w.out_fd);
                w.out_fd = -1;
                let t = w.inb.tail_len();
                if t > 0 && t <= max_in {
                    w.inb.append(b"\n");
                }
                self.process_worker(wid);
            }
            Ok(n) => {
                let w = &mut self.workers[wid];
                w.inb.append(&buf[..n]);
                let t = w.inb.tail_len();
                if t > max_in {
                    self.terminate_worker(wid, &format!("input buffer overflow: {} bytes without newline exceed max_input_buffer {}", t, max_in));
                    return;
                }
                self.process_worker(wid);
            }
            Err(e) if e == sys::EAGAIN => {}
            Err(e) => {
                warn!("read error on stdout of {} (errno {})", self.wdesc(wid), e);
                let w = &mut self.workers[wid];
                sys::sys_close(w.out_fd);
                w.out_fd = -1;
            }
        }
    }

    fn write_worker(&mut self, wid: usize) {
        let max_out = self.limits.max_output_queue;
        let wd = self.wdesc(wid);
        let w = &mut self.workers[wid];
        if w.in_fd < 0 {
            return;
        }
        match w.outq.write_to(w.in_fd) {
            Ok(()) => w.outq.update_full(max_out, &|| wd.clone()),
            Err(e) => {
                warn!("cannot write to stdin of {} (errno {}); closing its stdin", wd, e);
                sys::sys_close(w.in_fd);
                w.in_fd = -1;
                w.outq.clear();
            }
        }
    }

    fn timers(&mut self) {
        let now = Instant::now();
        let bp = self.limits.backpressure_timeout;
        for wid in 0..self.workers.len() {
            if let Some(t) = self.workers[wid].restart_at {
                if t <= now && !self.shutting_down {
                    self.workers[wid].restart_at = None;
                    info!("restarting worker {} (pool '{}')", wid, self.pools[self.workers[wid].pool].id);
                    self.spawn_worker(wid);
                }
            }
            if let Some(t) = self.workers[wid].kill_at {
                if t <= now && self.workers[wid].state == WState::Stopping {
                    self.workers[wid].kill_at = None;
                    warn!("{} did not exit after SIGTERM; sending SIGKILL", self.wdesc(wid));
                    sys::sys_kill(self.workers[wid].pid, sys::SIGKILL);
                }
            }
            if let Some(t) = self.workers[wid].outq.full_since {
                if now.duration_since(t) >= bp && self.workers[wid].state == WState::Running {
                    self.terminate_worker(wid, &format!("stdin queue full for {}s (backpressure_timeout_sec)", bp.as_secs_f64()));
                }
            }
        }
        let cids: Vec<u64> = self.clients.keys().cloned().collect();
        for cid in cids {
            let (full_since, linger, read_eof, stdio) = match self.clients.get(&cid) {
                Some(c) => (c.outq.full_since, c.linger_deadline, c.read_eof, c.stdio),
                None => continue,
            };
            if let Some(t) = full_since {
                if now.duration_since(t) >= bp && !self.shutting_down {
                    self.close_client(cid, &format!("backpressure timeout: output queue full for {}s", bp.as_secs_f64()), true);
                    continue;
                }
            }
            if read_eof && !stdio {
                let idle = {
                    let c = self.clients.get_mut(&cid).unwrap();
                    c.parked.is_none() && !c.inb.has_line() && c.outq.len() == 0
                } && self.pending_of_client(cid) == 0;
                if idle {
                    self.close_client(cid, "end of input, all responses delivered", false);
                } else if linger.map(|d| d <= now).unwrap_or(false) {
                    self.close_client(cid, "end of input, drain timeout reached", false);
                }
            }
        }
        // stdio EOF: shut down once everything has been answered
        if !self.shutting_down {
            if let Some(deadline) = self.stdio_eof_deadline {
                let cid = self.clients.values().find(|c| c.stdio).map(|c| c.cid);
                let done = match cid {
                    None => true,
                    Some(cid) => {
                        let idle = {
                            let c = self.clients.get_mut(&cid).unwrap();
                            c.parked.is_none() && !c.inb.has_line() && c.outq.len() == 0
                        };
                        idle && self.pending_of_client(cid) == 0
                    }
                };
                if done {
                    self.begin_shutdown(0, "stdin EOF, all requests answered");
                } else if deadline <= now {
                    warn!("drain timeout after stdin EOF with requests still pending");
                    self.begin_shutdown(0, "stdin EOF, drain timeout");
                }
            }
        }
        if self.shutting_down && !self.killed_all {
            if let Some(d) = self.shutdown_deadline {
                if d <= now && !self.all_workers_stopped() {
                    self.kill_remaining();
                }
            }
        }
    }

    fn pump(&mut self) {
        let cids: Vec<u64> = self
            .clients
            .values_mut()
            .filter_map(|c| if c.parked.is_some() || c.inb.has_line() { Some(c.cid) } else { None })
            .collect();
        for cid in cids {
            self.process_client(cid);
        }
        for wid in 0..self.workers.len() {
            let w = &mut self.workers[wid];
            if w.parked.is_some() || w.inb.has_line() {
                self.process_worker(wid);
            }
        }
    }

    fn next_timeout_ms(&self) -> i32 {
        let now = Instant::now();
        let mut best: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                best = Some(match best {
                    Some(b) if b <= t => b,
                    _ => t,
                });
            }
        };
        let bp = self.limits.backpressure_timeout;
        for w in &self.workers {
            consider(w.restart_at);
            consider(w.kill_at);
            consider(w.outq.full_since.map(|t| t + bp));
        }
        for c in self.clients.values() {
            consider(c.outq.full_since.map(|t| t + bp));
            consider(c.linger_deadline);
        }
        consider(self.stdio_eof_deadline);
        consider(self.listener_pause_until);
        if self.shutting_down && !self.killed_all {
            consider(self.shutdown_deadline);
        }
        match best {
            None => 1000,
            Some(t) => {
                if t <= now {
                    0
                } else {
                    ((t - now).as_micros().div_ceil(1000)).min(1000) as i32
                }
            }
        }
    }

    pub fn run(&mut self) -> i32 {
        for wid in 0..self.workers.len() {
            self.spawn_worker(wid);
        }
        loop {
            self.handle_signals();
            self.reap();
            self.timers();
            self.pump();
            if self.shutting_down && self.all_workers_stopped() {
                break;
            }
            // build poll set
            let mut pfds: Vec<PollFd> = Vec::new();
            let mut tags: Vec<Tag> = Vec::new();
            pfds.push(PollFd { fd: self.sigfd, events: POLLIN, revents: 0 });
            tags.push(Tag::Sig);
            let now = Instant::now();
            if self.listener_pause_until.map(|t| t <= now).unwrap_or(true) {
                self.listener_pause_until = None;
                let lfd = match &self.listener {
                    Listener::Unix(l, _) => Some(std::os::unix::io::AsRawFd::as_raw_fd(l)),
                    Listener::Tcp(l) => Some(std::os::unix::io::AsRawFd::as_raw_fd(l)),
                    Listener::None => None,
                };
                if let Some(fd) = lfd {
                    if !self.shutting_down {
                        pfds.push(PollFd { fd, events: POLLIN, revents: 0 });
                        tags.push(Tag::Listen);
                    }
                }
            }
            let shutting = self.shutting_down;
            for c in self.clients.values_mut() {
                let want_read = !shutting && !c.read_eof && c.parked.is_none() && !c.inb.has_line();
                if c.rfd == c.wfd {
                    let mut ev = 0;
                    if want_read {
                        ev |= POLLIN;
                    }
                    if c.outq.len() > 0 {
                        ev |= POLLOUT;
                    }
                    if ev != 0 {
                        pfds.push(PollFd { fd: c.rfd, events: ev, revents: 0 });
                        tags.push(Tag::ClientR(c.cid, c.rfd));
                    }
                } else {
                    if want_read {
                        pfds.push(PollFd { fd: c.rfd, events: POLLIN, revents: 0 });
                        tags.push(Tag::ClientR(c.cid, c.rfd));
                    }
                    if c.outq.len() > 0 {
                        pfds.push(PollFd { fd: c.wfd, events: POLLOUT, revents: 0 });
                        tags.push(Tag::ClientW(c.cid, c.wfd));
                    }
                }
            }
            for w in self.workers.iter_mut() {
                if w.out_fd >= 0 && w.parked.is_none() && !w.inb.has_line() {
                    pfds.push(PollFd { fd: w.out_fd, events: POLLIN, revents: 0 });
                    tags.push(Tag::WorkerR(w.wid, w.out_fd));
                }
                if w.in_fd >= 0 && w.outq.len() > 0 {
                    pfds.push(PollFd { fd: w.in_fd, events: POLLOUT, revents: 0 });
                    tags.push(Tag::WorkerW(w.wid, w.in_fd));
                }
            }
            let timeout = self.next_timeout_ms();
            let r = sys::sys_poll(&mut pfds, timeout);
            if r < 0 {
                let e = sys::errno();
                if e != sys::EINTR {
                    error!("poll failed (errno {})", e);
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            if r == 0 {
                continue;
            }
            for (i, tag) in tags.iter().enumerate() {
                let rev = pfds[i].revents;
                if rev == 0 {
                    continue;
                }
                match *tag {
                    Tag::Sig => sys::drain_fd(self.sigfd),
                    Tag::Listen => {
                        if !self.shutting_down {
                            self.accept_clients();
                        }
                    }
                    Tag::ClientR(cid, fd) => {
                        let ok = self.clients.get(&cid).map(|c| c.rfd == fd).unwrap_or(false);
                        if !ok {
                            continue;
                        }
                        if rev & POLLNVAL != 0 {
                            self.close_client(cid, "invalid descriptor", true);
                            continue;
                        }
                        let same = self.clients.get(&cid).map(|c| c.rfd == c.wfd).unwrap_or(false);
                        if same && rev & (POLLOUT | POLLERR | POLLHUP) != 0 && pfds[i].events & POLLOUT != 0 {
                            self.write_client(cid);
                        }
                        if pfds[i].events & POLLIN != 0 && rev & (POLLIN | POLLHUP | POLLERR) != 0 {
                            self.read_client(cid, rev & POLLHUP != 0);
                        } else if same && rev & POLLHUP != 0 && pfds[i].events & POLLOUT == 0 {
                            self.close_client(cid, "connection closed by peer", false);
                        }
                    }
                    Tag::ClientW(cid, fd) => {
                        let ok = self.clients.get(&cid).map(|c| c.wfd == fd).unwrap_or(false);
                        if ok {
                            self.write_client(cid);
                        }
                    }
                    Tag::WorkerR(wid, fd) => {
                        if self.workers[wid].out_fd == fd {
                            self.read_worker(wid);
                        }
                    }
                    Tag::WorkerW(wid, fd) => {
                        if self.workers[wid].in_fd == fd {
                            self.write_worker(wid);
                        }
                    }
                }
            }
        }
        info!("all workers stopped");
        self.final_flush();
        self.close_listener();
        info!("shutdown complete (exit code {})", self.exit_code);
        self.exit_code
    }
}
