//! Hand-declared libc bindings (Linux, x86_64/aarch64 glibc).
#![allow(non_camel_case_types, dead_code)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

pub type c_int = i32;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PollFd {
    pub fd: c_int,
    pub events: i16,
    pub revents: i16,
}

extern "C" {
    fn poll(fds: *mut PollFd, nfds: u64, timeout: c_int) -> c_int;
    fn read(fd: c_int, buf: *mut u8, n: usize) -> isize;
    fn write(fd: c_int, buf: *const u8, n: usize) -> isize;
    fn close(fd: c_int) -> c_int;
    fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    fn kill(pid: c_int, sig: c_int) -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn signal(sig: c_int, handler: usize) -> usize;
    fn pipe2(fds: *mut c_int, flags: c_int) -> c_int;
    fn __errno_location() -> *mut c_int;
}

pub const POLLIN: i16 = 0x1;
pub const POLLOUT: i16 = 0x4;
pub const POLLERR: i16 = 0x8;
pub const POLLHUP: i16 = 0x10;
pub const POLLNVAL: i16 = 0x20;

pub const F_GETFL: c_int = 3;
pub const F_SETFL: c_int = 4;
pub const O_NONBLOCK: c_int = 0o4000;
pub const O_CLOEXEC: c_int = 0o2000000;

pub const SIGINT: c_int = 2;
pub const SIGKILL: c_int = 9;
pub const SIGPIPE: c_int = 13;
pub const SIGTERM: c_int = 15;
pub const SIGCHLD: c_int = 17;
const SIG_IGN: usize = 1;
const WNOHANG: c_int = 1;

pub const EINTR: i32 = 4;
pub const EAGAIN: i32 = 11;

pub fn errno() -> i32 {
    unsafe { *__errno_location() }
}

pub fn sys_poll(fds: &mut [PollFd], timeout_ms: i32) -> i32 {
    unsafe { poll(fds.as_mut_ptr(), fds.len() as u64, timeout_ms) }
}

/// Ok(n) bytes, Ok(0) EOF, Err(errno)
pub fn sys_read(fd: c_int, buf: &mut [u8]) -> Result<usize, i32> {
    loop {
        let r = unsafe { read(fd, buf.as_mut_ptr(), buf.len()) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = errno();
        if e != EINTR {
            return Err(e);
        }
    }
}

pub fn sys_write(fd: c_int, buf: &[u8]) -> Result<usize, i32> {
    loop {
        let r = unsafe { write(fd, buf.as_ptr(), buf.len()) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = errno();
        if e != EINTR {
            return Err(e);
        }
    }
}

pub fn sys_close(fd: c_int) {
    if fd >= 0 {
        unsafe {
            close(fd);
        }
    }
}

pub fn get_fl(fd: c_int) -> c_int {
    unsafe { fcntl(fd, F_GETFL) }
}

pub fn set_fl(fd: c_int, fl: c_int) {
    unsafe {
        fcntl(fd, F_SETFL, fl);
    }
}

pub fn set_nonblock(fd: c_int) {
    let fl = get_fl(fd);
    if fl >= 0 {
        set_fl(fd, fl | O_NONBLOCK);
    }
}

pub fn sys_kill(pid: c_int, sig: c_int) -> bool {
    pid > 0 && unsafe { kill(pid, sig) } == 0
}

/// Reap one exited child without blocking: Some((pid, raw status)).
pub fn reap_any() -> Option<(c_int, c_int)> {
    let mut st: c_int = 0;
    let r = unsafe { waitpid(-1, &mut st, WNOHANG) };
    if r > 0 {
        Some((r, st))
    } else {
        None
    }
}

/// Blocking wait for a specific pid.
pub fn wait_pid(pid: c_int) -> Option<c_int> {
    let mut st: c_int = 0;
    loop {
        let r = unsafe { waitpid(pid, &mut st, 0) };
        if r == pid {
            return Some(st);
        }
        if r < 0 && errno() == EINTR {
            continue;
        }
        return None;
    }
}

pub fn describe_status(st: c_int) -> String {
    let sig = st & 0x7f;
    if sig == 0 {
        format!("exit status {}", (st >> 8) & 0xff)
    } else if sig != 0x7f {
        format!("killed by signal {}", sig)
    } else {
        format!("status 0x{:x}", st)
    }
}

// ---- signals via self-pipe ----

static PIPE_W: AtomicI32 = AtomicI32::new(-1);
pub static TERM_COUNT: AtomicUsize = AtomicUsize::new(0);
pub static LAST_TERM_SIG: AtomicI32 = AtomicI32::new(0);
pub static CHLD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: c_int) {
    unsafe {
        let saved = *__errno_location();
        if sig == SIGCHLD {
            CHLD.store(true, Ordering::SeqCst);
        } else {
            LAST_TERM_SIG.store(sig, Ordering::SeqCst);
            TERM_COUNT.fetch_add(1, Ordering::SeqCst);
        }
        let fd = PIPE_W.load(Ordering::SeqCst);
        if fd >= 0 {
            let b = [0u8; 1];
            write(fd, b.as_ptr(), 1);
        }
        *__errno_location() = saved;
    }
}

/// Installs handlers; returns the read end of the self-pipe.
pub fn install_signals() -> Result<c_int, String> {
    let mut fds = [-1 as c_int; 2];
    if unsafe { pipe2(fds.as_mut_ptr(), O_NONBLOCK | O_CLOEXEC) } != 0 {
        return Err(format!("pipe2 failed: errno {}", errno()));
    }
    PIPE_W.store(fds[1], Ordering::SeqCst);
    let h = on_signal as extern "C" fn(c_int) as usize;
    unsafe {
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTERM, h);
        signal(SIGINT, h);
        signal(SIGCHLD, h);
    }
    Ok(fds[0])
}

pub fn drain_fd(fd: c_int) {
    let mut b = [0u8; 256];
    while let Ok(n) = sys_read(fd, &mut b) {
        if n == 0 {
            break;
        }
    }
}
