package javabus;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The stdio Bus daemon core. Every field of this class is owned by the single event-loop
 * thread (the one that calls {@link #run}); helper threads only move bytes through pipes and
 * communicate with the loop through {@link #post}. See READINGS.md B1.
 */
final class Bus {
    enum Mode { STDIO, UNIX, TCP }
    enum WState { STARTING, RUNNING, STOPPING, STOPPED }

    static final long RESTART_BASE_MS = 100;
    static final long RESTART_CAP_MS = 30_000;
    static final long EOF_AFTER_EXIT_GRACE_MS = 2_000;
    static final long FLUSH_GRACE_MS = 2_000;
    static final int CHUNK = 65536;

    final Config cfg;
    final Mode mode;
    final String address;

    private Selector selector;
    private ServerSocketChannel listener;
    private SelectionKey listenerKey;
    private Path unixPath;
    private final ConcurrentLinkedQueue<Runnable> events = new ConcurrentLinkedQueue<>();
    private final PriorityQueue<Timer> timers = new PriorityQueue<>((a, b) ->
            a.at != b.at ? Long.compare(a.at, b.at) : Long.compare(a.seq, b.seq));
    private long timerSeq;
    private final List<Worker> workers = new ArrayList<>();
    private final Map<Integer, Client> clients = new LinkedHashMap<>();
    private int nextConnId = 1;
    private final Map<String, Session> sessions = new HashMap<>();
    private int pendingTotal;
    private int rrNext;
    private boolean shuttingDown;
    private boolean flushing;
    private long flushDeadline;
    private boolean done;
    private Timer drainTimer;
    private final ByteBuffer readBuf = ByteBuffer.allocate(CHUNK);
    private Thread stdoutWriter;

    Bus(Config cfg, Mode mode, String address) {
        this.cfg = cfg;
        this.mode = mode;
        this.address = address;
    }

    static long now() { return System.nanoTime() / 1_000_000L; }

    static long secToMs(double s) { return (long) Math.ceil(s * 1000.0); }

    // ================================================================ events & timers

    /** Thread-safe: run r on the loop thread. */
    void post(Runnable r) {
        events.add(r);
        Selector s = selector;
        if (s != null) s.wakeup();
    }

    final class Timer {
        long at;
        long seq;
        Runnable r;
        boolean cancelled;
        void cancel() { cancelled = true; }
    }

    Timer schedule(long delayMs, Runnable r) {
        Timer t = new Timer();
        t.at = now() + Math.max(0, delayMs);
        t.seq = timerSeq++;
        t.r = r;
        timers.add(t);
        return t;
    }

    // ================================================================ endpoints

    /** Growable input buffer with NDJSON framing. */
    static final class InBuf {
        byte[] buf = new byte[CHUNK];
        int start, end, scanFrom;

        void append(byte[] src, int off, int n) {
            if (start > 0 && (end + n > buf.length || start > buf.length / 2)) {
                System.arraycopy(buf, start, buf, 0, end - start);
                end -= start;
                scanFrom -= start;
                start = 0;
            }
            if (end + n > buf.length) {
                int cap = buf.length;
                while (cap < end + n) cap *= 2;
                buf = Arrays.copyOf(buf, cap);
            }
            System.arraycopy(src, off, buf, end, n);
            end += n;
        }

        int nextNewline() {
            for (int i = scanFrom; i < end; i++) if (buf[i] == '\n') return i;
            scanFrom = end;
            return -1;
        }

        int pending() { return end - start; }

        void shrinkIfIdle() {
            if (start == end) {
                start = end = scanFrom = 0;
                if (buf.length > 4 * CHUNK) buf = new byte[CHUNK];
            }
        }
    }

    /** An input side + output side of one connection (client or worker). */
    abstract class Endpoint {
        final InBuf in = new InBuf();
        boolean paused;          // dispatch paused by backpressure
        boolean inputDone;       // no more input will be read (EOF / shutdown)
        boolean dead;            // closed; ignore everything
        final Set<Endpoint> blockedOn = new LinkedHashSet<>();
        boolean full;
        long fullSince;
        Timer bpTimer;
        final Set<Endpoint> waiters = new LinkedHashSet<>();

        abstract String name();
        abstract long queued();
        abstract void send(byte[] msg);
        abstract void ioPause();
        abstract void ioResume();
        abstract void handleLine(byte[] b, int off, int len);
        abstract void onOverflow();
        abstract void onStalled();
        /** Called when the output queue becomes full (for thread sinks: arm the notification). */
        void armDrain() { }
    }

    /** Byte movers for pipe-based endpoints (worker pipes, stdio client). */
    final class PipeIO {
        final Endpoint ep;
        final LinkedBlockingQueue<byte[]> q = new LinkedBlockingQueue<>();
        final AtomicLong queued = new AtomicLong();
        volatile boolean notifyDrain;
        final Semaphore permit = new Semaphore(1);
        boolean owed;
        Thread reader, writer;
        InputStream is;
        OutputStream os;
        final byte[] closeMark = new byte[0];

        PipeIO(Endpoint ep) { this.ep = ep; }

        void startReader(InputStream is, String tname) {
            this.is = is;
            reader = new Thread(() -> {
                byte[] buf = new byte[CHUNK];
                try {
                    while (true) {
                        permit.acquire();
                        int n;
                        try {
                            n = is.read(buf);
                        } catch (IOException e) {
                            n = -1;
                        }
                        if (n < 0) {
                            post(() -> onPipeEOF(ep));
                            return;
                        }
                        if (n == 0) { permit.release(); continue; }
                        final byte[] chunk = Arrays.copyOf(buf, n);
                        post(() -> onPipeChunk(ep, chunk));
                    }
                } catch (InterruptedException e) {
                    // endpoint finished
                }
            }, tname);
            reader.setDaemon(true);
            reader.start();
        }

        void startWriter(OutputStream raw, String tname) {
            this.os = raw;
            final long limit = cfg.maxOutputQueue;
            writer = new Thread(() -> {
                OutputStream out = new BufferedOutputStream(raw, CHUNK);
                boolean failed = false;
                try {
                    while (true) {
                        byte[] first = q.take();
                        if (first == closeMark) break;
                        long n = first.length;
                        if (!failed) {
                            try {
                                out.write(first);
                                byte[] b;
                                while (n < CHUNK && (b = q.peek()) != null && b != closeMark) {
                                    q.poll();
                                    out.write(b);
                                    n += b.length;
                                }
                                out.flush();
                            } catch (IOException e) {
                                failed = true;
                                final IOException ex = e;
                                post(() -> onPipeWriteError(ep, ex));
                            }
                        }
                        long left = queued.addAndGet(-n);
                        if (notifyDrain && left < limit) {
                            notifyDrain = false;
                            post(() -> checkDrained(ep));
                        }
                    }
                } catch (InterruptedException e) {
                    // abandon
                }
                try { out.flush(); } catch (IOException ignored) { }
                try { raw.close(); } catch (IOException ignored) { }
            }, tname);
            writer.setDaemon(true);
            writer.start();
        }

        void send(byte[] msg) {
            queued.addAndGet(msg.length);
            q.add(msg);
        }

        /** Loop thread: the endpoint is full; make sure the writer tells us when it drains. */
        void armDrain() {
            notifyDrain = true;
            if (queued.get() < cfg.maxOutputQueue) {
                notifyDrain = false;
                post(() -> checkDrained(ep));
            }
        }

        /** Loop thread: finished processing a chunk. */
        void chunkDone() {
            if (ep.paused || ep.inputDone) owed = true;
            else permit.release();
        }

        void resume() {
            if (owed && !ep.inputDone) {
                owed = false;
                permit.release();
            }
        }

        void closeOutput() { q.add(closeMark); }

        void stopReader() {
            if (reader != null) reader.interrupt();
        }
    }

    // ================================================================ clients

    abstract class Client extends Endpoint {
        final int cid;
        final Set<String> ownedSessions = new LinkedHashSet<>();
        final Set<Pending> pending = new LinkedHashSet<>();
        boolean closed;

        Client(int cid) { this.cid = cid; }

        @Override void handleLine(byte[] b, int off, int len) { onClientLine(this, b, off, len); }

        @Override void onOverflow() {
            Log.error(name() + ": input buffer overflow (message exceeds max_input_buffer="
                    + cfg.maxInputBuffer + " bytes); closing connection");
            closeClient(this, "input buffer overflow");
        }

        @Override void onStalled() {
            Log.error(name() + ": output queue full for more than backpressure_timeout_sec="
                    + cfg.backpressureTimeoutSec + "; closing connection");
            closeClient(this, "backpressure timeout");
        }

        abstract void closeIO();
    }

    final class SocketClient extends Client {
        final SocketChannel ch;
        final String peer;
        SelectionKey key;
        final ArrayDeque<ByteBuffer> outq = new ArrayDeque<>();
        long outBytes;
        boolean writeFailed;

        SocketClient(int cid, SocketChannel ch, String peer) {
            super(cid);
            this.ch = ch;
            this.peer = peer;
        }

        @Override String name() { return "client " + cid + " (" + peer + ")"; }
        @Override long queued() { return outBytes; }

        @Override void send(byte[] msg) {
            if (closed || writeFailed) return;
            outq.add(ByteBuffer.wrap(msg));
            outBytes += msg.length;
            if ((key.interestOps() & SelectionKey.OP_WRITE) == 0) flush(false);
        }

        void flush() { flush(true); }

        /** Writes what the socket accepts; may release backpressure only when called from the selector. */
        void flush(boolean mayRelease) {
            try {
                while (!outq.isEmpty()) {
                    ByteBuffer[] batch = outq.toArray(new ByteBuffer[0]);
                    if (batch.length > 64) batch = Arrays.copyOf(batch, 64);
                    long w = ch.write(batch);
                    outBytes -= w;
                    while (!outq.isEmpty() && !outq.peek().hasRemaining()) outq.poll();
                    if (w == 0) break;
                }
            } catch (IOException e) {
                writeFailed = true;
                final String why = "write error: " + e.getMessage();
                post(() -> closeClient(this, why));
                return;
            }
            updateInterest();
            if (full && outBytes < cfg.maxOutputQueue) {
                if (mayRelease) release(this);
                else post(() -> checkDrained(this));
            }
        }

        void updateInterest() {
            if (!key.isValid()) return;
            int ops = 0;
            if (!paused && !inputDone) ops |= SelectionKey.OP_READ;
            if (!outq.isEmpty()) ops |= SelectionKey.OP_WRITE;
            key.interestOps(ops);
        }

        @Override void ioPause() { updateInterest(); }
        @Override void ioResume() { updateInterest(); }

        @Override void closeIO() {
            key.cancel();
            try { ch.close(); } catch (IOException ignored) { }
        }
    }

    final class StdioClient extends Client {
        final PipeIO io = new PipeIO(this);

        StdioClient() { super(0); }

        @Override String name() { return "client 0 (stdio)"; }
        @Override long queued() { return io.queued.get(); }
        @Override void send(byte[] msg) { if (!closed) io.send(msg); }
        @Override void ioPause() { }
        @Override void ioResume() { io.resume(); }
        @Override void armDrain() { io.armDrain(); }
        @Override void closeIO() {
            io.stopReader();
            io.closeOutput();
        }
    }

    // ================================================================ workers, sessions, pending

    final class Session {
        final String id;
        final Worker worker;
        final Client owner;
        Session(String id, Worker w, Client c) { this.id = id; this.worker = w; this.owner = c; }
    }

    final class Pending {
        final Client client;
        final Worker worker;
        final String idKey;
        final String idText;
        final String sessionId;
        Pending(Client c, Worker w, String k, String t, String s) {
            client = c; worker = w; idKey = k; idText = t; sessionId = s;
        }
    }

    final class Worker {
        final int wid;
        final Config.Pool pool;
        final int instance;
        WState state = WState.STOPPED;
        Incarnation inc;
        final ArrayDeque<Long> restartTimes = new ArrayDeque<>();
        Timer restartTimer;
        boolean givenUp;
        final Set<String> sessionIds = new LinkedHashSet<>();
        final Map<String, ArrayDeque<Pending>> pending = new HashMap<>();

        Worker(int wid, Config.Pool pool, int instance) {
            this.wid = wid; this.pool = pool; this.instance = instance;
        }

        String name() {
            return "worker " + wid + " (pool " + pool.id + (inc != null ? ", pid " + inc.pid : "") + ")";
        }
    }

    /** One running process of a worker slot. */
    final class Incarnation extends Endpoint {
        final Worker w;
        final Process proc;
        final long pid;
        final PipeIO io = new PipeIO(this);
        boolean discardOutput;   // set when terminated for a fault (5.3)
        boolean exited;
        int exitCode;
        boolean stdoutEOF;
        boolean finalized;
        Timer killTimer, eofTimer;

        Incarnation(Worker w, Process p) {
            this.w = w;
            this.proc = p;
            this.pid = p.pid();
        }

        @Override String name() { return "worker " + w.wid + " (pool " + w.pool.id + ", pid " + pid + ")"; }
        @Override long queued() { return io.queued.get(); }
        @Override void send(byte[] msg) { io.send(msg); }
        @Override void ioPause() { }
        @Override void ioResume() { io.resume(); }
        @Override void armDrain() { io.armDrain(); }
        @Override void handleLine(byte[] b, int off, int len) { onWorkerLine(this, b, off, len); }

        @Override void onOverflow() {
            Log.error(name() + ": stdout input buffer overflow (message exceeds max_input_buffer="
                    + cfg.maxInputBuffer + " bytes)");
            failWorker(this, "input buffer overflow");
        }

        @Override void onStalled() {
            Log.error(name() + ": stdin queue full for more than backpressure_timeout_sec="
                    + cfg.backpressureTimeoutSec);
            failWorker(this, "backpressure timeout");
        }
    }

    // ================================================================ startup

    /** Returns the process exit code. */
    int run() {
        try {
            selector = Selector.open();
        } catch (IOException e) {
            Log.error("cannot open selector: " + e);
            return 1;
        }
        int id = 0;
        for (Config.Pool p : cfg.pools)
            for (int i = 0; i < p.instances; i++) workers.add(new Worker(id++, p, i));

        if (mode != Mode.STDIO) {
            if (!openListener()) return 1;
        }
        installSignals();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (Worker w : workers) {
                Incarnation inc = w.inc;
                if (inc != null && inc.proc.isAlive()) inc.proc.toHandle().destroyForcibly();
            }
        }, "javabus-exit-hook"));

        Log.info("stdio Bus v0.1.0 (javabus) starting: mode=" + mode.name().toLowerCase()
                + ", " + workers.size() + " worker(s) in " + cfg.pools.size() + " pool(s)");
        for (Worker w : workers) spawn(w);
        if (mode == Mode.STDIO) openStdioClient();

        try {
            loop();
        } catch (RuntimeException | Error e) {
            Log.error("internal error: " + e);
            StringBuilder sb = new StringBuilder();
            for (StackTraceElement st : e.getStackTrace()) sb.append("\n    at ").append(st);
            Log.debug("stack:" + sb);
            for (Worker w : workers) if (w.inc != null) w.inc.proc.toHandle().destroyForcibly();
            cleanupListener();
            return 70;
        }
        Log.info("shutdown complete");
        return 0;
    }

    private boolean openListener() {
        try {
            if (mode == Mode.UNIX) {
                unixPath = Paths.get(address);
                if (Files.exists(unixPath, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                    if (Files.isRegularFile(unixPath, java.nio.file.LinkOption.NOFOLLOW_LINKS)
                            || Files.isDirectory(unixPath, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                        Log.error("unix socket path " + address + " exists and is not a socket");
                        unixPath = null;
                        return false;
                    }
                    boolean live = false;
                    try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
                        live = probe.connect(UnixDomainSocketAddress.of(unixPath));
                    } catch (IOException e) {
                        live = false;
                    }
                    if (live) {
                        Log.error("unix socket " + address + " is in use by another process");
                        unixPath = null;
                        return false;
                    }
                    Files.delete(unixPath);
                    Log.info("removed stale socket " + address);
                }
                listener = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
                listener.bind(UnixDomainSocketAddress.of(unixPath), 128);
                Log.info("listening on unix " + address);
            } else {
                int colon = address.lastIndexOf(':');
                String host = address.substring(0, colon);
                int port = Integer.parseInt(address.substring(colon + 1));
                if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
                InetSocketAddress sa = host.isEmpty() ? new InetSocketAddress(port) : new InetSocketAddress(host, port);
                if (sa.isUnresolved()) {
                    Log.error("cannot resolve host " + host);
                    return false;
                }
                listener = ServerSocketChannel.open();
                listener.setOption(StandardSocketOptions.SO_REUSEADDR, true);
                listener.bind(sa, 128);
                InetSocketAddress bound = (InetSocketAddress) listener.getLocalAddress();
                String h = bound.getAddress().getHostAddress();
                if (h.indexOf(':') >= 0) h = "[" + h + "]";
                Log.info("listening on tcp " + h + ":" + bound.getPort());
            }
            listener.configureBlocking(false);
            listenerKey = listener.register(selector, SelectionKey.OP_ACCEPT);
            return true;
        } catch (IOException | RuntimeException e) {
            Log.error("cannot listen on " + mode.name().toLowerCase() + " " + address + ": " + e);
            if (mode == Mode.UNIX) unixPath = null; // do not unlink something we did not create
            return false;
        }
    }

    private void cleanupListener() {
        if (listener != null) {
            if (listenerKey != null) listenerKey.cancel();
            try { listener.close(); } catch (IOException ignored) { }
            // NIO closes a registered channel's fd only at the next selection: flush it now, so
            // the socket is closed before the workers are signalled (10.2's order; I2)
            try { if (selector != null) selector.selectNow(); } catch (IOException ignored) { }
            listener = null;
        }
        if (unixPath != null) {
            try { Files.deleteIfExists(unixPath); } catch (IOException ignored) { }
            unixPath = null;
        }
    }

    @SuppressWarnings("restriction")
    private void installSignals() {
        for (String s : new String[]{"TERM", "INT"}) {
            try {
                sun.misc.Signal.handle(new sun.misc.Signal(s), sig -> post(() -> beginShutdown("SIG" + s, true)));
            } catch (IllegalArgumentException e) {
                Log.warn("cannot install handler for SIG" + s + ": " + e.getMessage());
            }
        }
    }

    private void openStdioClient() {
        StdioClient c = new StdioClient();
        clients.put(c.cid, c);
        c.io.startWriter(new FileOutputStream(FileDescriptor.out), "javabus-stdout");
        stdoutWriter = c.io.writer;
        c.io.startReader(new FileInputStream(FileDescriptor.in), "javabus-stdin");
        Log.info("client 0 (stdio) connected");
    }

    // ================================================================ main loop

    private void loop() {
        while (!done) {
            long delay = -1;
            Timer head;
            while ((head = timers.peek()) != null && head.cancelled) timers.poll();
            if (head != null) delay = Math.max(0, head.at - now());
            if (flushing) {
                long d = Math.max(0, flushDeadline - now());
                delay = delay < 0 ? Math.min(d, 50) : Math.min(delay, Math.min(d, 50));
            }
            try {
                if (!events.isEmpty() || delay == 0) selector.selectNow();
                else if (delay < 0) selector.select();
                else selector.select(delay);
            } catch (IOException e) {
                Log.error("select failed: " + e);
            }
            Iterator<SelectionKey> it = selector.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey k = it.next();
                it.remove();
                if (!k.isValid()) continue;
                Object att = k.attachment();
                try {
                    if (att == null) {
                        if (k.isAcceptable()) accept();
                    } else {
                        SocketClient c = (SocketClient) att;
                        if (k.isValid() && k.isWritable()) c.flush();
                        if (k.isValid() && k.isReadable()) readSocket(c);
                    }
                } catch (java.nio.channels.CancelledKeyException e) {
                    // closed meanwhile
                }
            }
            Runnable r;
            int n = 0;
            while (n++ < 100000 && (r = events.poll()) != null) r.run();
            long t = now();
            while ((head = timers.peek()) != null && (head.cancelled || head.at <= t)) {
                timers.poll();
                if (!head.cancelled) head.r.run();
            }
            if (flushing) checkFlushDone();
        }
    }

    private void accept() {
        SocketChannel ch;
        try {
            ch = listener.accept();
        } catch (IOException e) {
            Log.warn("accept failed: " + e.getMessage());
            return;
        }
        if (ch == null) return;
        if (shuttingDown) {
            try { ch.close(); } catch (IOException ignored) { }
            return;
        }
        int fds = 1 + 2 * workers.size() + clients.size() + 1;
        if (fds > Config.MAX_CONNECTIONS) {
            Log.warn("connection limit reached (MAX_CONNECTIONS=" + Config.MAX_CONNECTIONS + "); rejecting new client");
            try { ch.close(); } catch (IOException ignored) { }
            return;
        }
        String peer;
        try {
            ch.configureBlocking(false);
            if (mode == Mode.TCP) {
                ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                InetSocketAddress ra = (InetSocketAddress) ch.getRemoteAddress();
                peer = "tcp " + ra.getAddress().getHostAddress() + ":" + ra.getPort();
            } else {
                peer = "unix " + address;
            }
        } catch (IOException e) {
            try { ch.close(); } catch (IOException ignored) { }
            return;
        }
        SocketClient c = new SocketClient(nextConnId++, ch, peer);
        try {
            c.key = ch.register(selector, SelectionKey.OP_READ, c);
        } catch (ClosedChannelException e) {
            return;
        }
        clients.put(c.cid, c);
        Log.info(c.name() + " connected");
    }

    private void readSocket(SocketClient c) {
        if (c.closed || c.paused || c.inputDone) return;
        readBuf.clear();
        int n;
        try {
            n = c.ch.read(readBuf);
        } catch (IOException e) {
            closeClient(c, "read error: " + e.getMessage());
            return;
        }
        if (n < 0) {
            closeClient(c, "connection closed by client");
            return;
        }
        if (n == 0) return;
        c.in.append(readBuf.array(), 0, n);
        processLines(c);
        if (!c.closed) c.updateInterest();
    }

    // ================================================================ framing

    private void processLines(Endpoint e) {
        InBuf ib = e.in;
        long max = cfg.maxInputBuffer;
        while (!e.paused && !e.dead) {
            int nl = ib.nextNewline();
            if (nl < 0) {
                if (ib.pending() > max) e.onOverflow();
                break;
            }
            int off = ib.start;
            int len = nl - off;
            ib.start = nl + 1;
            ib.scanFrom = ib.start;
            if (len > max) {
                e.onOverflow();
                return;
            }
            e.handleLine(ib.buf, off, len);
        }
        ib.shrinkIfIdle();
    }

    private void onPipeChunk(Endpoint e, byte[] chunk) {
        PipeIO io = pipeOf(e);
        if (e.dead || e.inputDone) {
            // keep draining a dying worker's stdout so it never blocks on a full pipe
            if (e instanceof Incarnation && !((Incarnation) e).finalized) io.permit.release();
            return;
        }
        if (e instanceof Incarnation && ((Incarnation) e).discardOutput) {
            io.permit.release();
            return;
        }
        e.in.append(chunk, 0, chunk.length);
        processLines(e);
        if (!e.dead) io.chunkDone();
    }

    private PipeIO pipeOf(Endpoint e) {
        return (e instanceof Incarnation) ? ((Incarnation) e).io : ((StdioClient) e).io;
    }

    private void onPipeEOF(Endpoint e) {
        if (e instanceof Incarnation) {
            Incarnation inc = (Incarnation) e;
            inc.stdoutEOF = true;
            if (inc.in.pending() > 0 && !inc.discardOutput && !inc.finalized)
                Log.debug(inc.name() + ": discarding " + inc.in.pending() + " unterminated byte(s) at EOF");
            if (inc.exited) finalizeIncarnation(inc);
        } else {
            StdioClient c = (StdioClient) e;
            if (c.closed) return;
            if (c.in.pending() > 0) {
                // finish dispatching complete lines first if paused; they would be lost otherwise
                Log.debug(c.name() + ": discarding unterminated data at EOF");
            }
            c.inputDone = true;
            Log.info(c.name() + ": stdin closed (EOF)");
            stdioLingerCheck(c);
        }
    }

    private void onPipeWriteError(Endpoint e, IOException ex) {
        if (e instanceof Incarnation) {
            Incarnation inc = (Incarnation) e;
            if (inc.finalized || inc.w.state != WState.RUNNING) return;
            Log.warn(inc.name() + ": cannot write to worker stdin: " + ex.getMessage());
            failWorker(inc, "stdin write error");
        } else {
            closeClient((Client) e, "stdout write error: " + ex.getMessage());
        }
    }

    // ================================================================ backpressure (7.3.1)

    private void deliver(Endpoint src, Endpoint dst, byte[] msg) {
        if (dst.dead) return;
        dst.send(msg);
        if (dst.dead) return;
        if (dst.queued() > cfg.maxOutputQueue) {
            if (!dst.full) {
                dst.full = true;
                dst.fullSince = now();
                final long since = dst.fullSince;
                Log.warn(dst.name() + ": output queue exceeds max_output_queue=" + cfg.maxOutputQueue
                        + " bytes (" + dst.queued() + " queued); applying backpressure");
                dst.bpTimer = schedule(secToMs(cfg.backpressureTimeoutSec), () -> {
                    if (!dst.dead && dst.full && dst.fullSince == since) dst.onStalled();
                });
            }
            if (src != null && !src.dead) {
                dst.waiters.add(src);
                src.blockedOn.add(dst);
                if (!src.paused) {
                    src.paused = true;
                    src.ioPause();
                    Log.debug(src.name() + ": input paused (backpressure from " + dst.name() + ")");
                }
            }
            dst.armDrain();
        }
    }

    private void checkDrained(Endpoint d) {
        if (d.dead || !d.full) return;
        if (d.queued() < cfg.maxOutputQueue) release(d);
        else d.armDrain();
    }

    /** d's queue is below the limit again, or d is going away: resume its waiters. */
    private void release(Endpoint d) { release(d, true); }

    private void release(Endpoint d, boolean drained) {
        if (d.full) {
            d.full = false;
            if (drained) Log.info(d.name() + ": output queue drained; releasing backpressure");
        }
        if (d.bpTimer != null) { d.bpTimer.cancel(); d.bpTimer = null; }
        List<Endpoint> ws = new ArrayList<>(d.waiters);
        d.waiters.clear();
        for (Endpoint s : ws) {
            s.blockedOn.remove(d);
            if (s.blockedOn.isEmpty() && s.paused && !s.dead) resumeInput(s);
        }
    }

    private void resumeInput(Endpoint s) {
        s.paused = false;
        Log.debug(s.name() + ": input resumed");
        processLines(s);
        if (!s.paused && !s.dead) {
            s.ioResume();
            if (s instanceof StdioClient) stdioLingerCheck((StdioClient) s);
        }
    }

    /** Removes e from all backpressure relations (e is closing). */
    private void detachBackpressure(Endpoint e) {
        release(e, false);
        for (Endpoint d : new ArrayList<>(e.blockedOn)) d.waiters.remove(e);
        e.blockedOn.clear();
    }

    // ================================================================ routing: client -> worker (6.1, 6.2)

    private void onClientLine(Client c, byte[] b, int off, int len) {
        if (c.closed || shuttingDown) return;
        if (Json.isBlank(b, off, len)) return;
        Json.Routing r;
        try {
            r = Json.scanRouting(b, off, len);
        } catch (Json.ParseException e) {
            Log.warn(c.name() + ": message is not valid JSON (" + e.getMessage() + "); closing connection");
            closeClient(c, "malformed JSON");
            return;
        }
        if (r.bad != null) {
            Log.warn(c.name() + ": cannot extract routing fields (" + r.bad + "); closing connection");
            closeClient(c, "bad routing fields");
            return;
        }
        byte[] msg = Arrays.copyOfRange(b, off, off + len + 1);
        msg[len] = '\n';
        boolean isRequest = r.hasId && !r.isResponseShaped();

        Worker w;
        boolean newSession = false;
        if (r.sessionId != null) {
            Session s = sessions.get(r.sessionId);
            if (s != null) {
                w = s.worker;
                if (s.owner != c)
                    Log.debug(c.name() + ": uses session \"" + r.sessionId + "\" owned by " + s.owner.name());
            } else {
                if (sessions.size() >= Config.MAX_SESSIONS) {
                    Log.warn(c.name() + ": session table full (STDIO_BUS_MAX_SESSIONS=" + Config.MAX_SESSIONS
                            + "); message " + describe(r) + " discarded");
                    return;
                }
                w = pickWorker();
                newSession = true;
            }
        } else {
            w = pickWorker();
        }
        if (w == null || w.inc == null || w.state != WState.RUNNING) {
            Log.warn(c.name() + ": no worker available; message " + describe(r) + " discarded");
            return;
        }
        // 6.3.1 "route the Response to the originating Client": another client's request with
        // this id already pending on w would make the answers indistinguishable (E10)
        if (isRequest && idHeldByOther(w, r.idKey, c)) {
            Worker alt = (r.sessionId == null || newSession) ? pickWorkerFreeOf(r.idKey, c) : null;
            if (alt == null) {
                Log.warn(c.name() + ": request " + describe(r) + " uses an id another client has pending on "
                        + w.name() + "; discarded");
                return;
            }
            w = alt;
        }
        if (isRequest && pendingTotal >= Config.MAX_PENDING_REQUESTS) {
            Log.warn(c.name() + ": pending request table full (STDIO_BUS_MAX_PENDING_REQUESTS="
                    + Config.MAX_PENDING_REQUESTS + "); request " + describe(r) + " discarded");
            return;
        }
        if (newSession) {
            Session s = new Session(r.sessionId, w, c);
            sessions.put(s.id, s);
            w.sessionIds.add(s.id);
            c.ownedSessions.add(s.id);
            Log.debug("session \"" + s.id + "\" created: " + w.name() + ", owner " + c.name());
        }
        if (isRequest) {
            Pending p = new Pending(c, w, r.idKey, r.idText, r.sessionId);
            w.pending.computeIfAbsent(r.idKey, k -> new ArrayDeque<>()).add(p);
            c.pending.add(p);
            pendingTotal++;
        }
        if (Log.on(Log.DEBUG)) Log.debug(c.name() + " -> " + w.name() + ": " + describe(r) + " (" + len + " bytes)");
        deliver(c, w.inc, msg);
    }

    private static boolean idHeldByOther(Worker w, String idKey, Client c) {
        ArrayDeque<Pending> dq = w.pending.get(idKey);
        if (dq == null) return false;
        for (Pending p : dq) if (p.client != c) return true;
        return false;
    }

    /** The next RUNNING worker (round-robin) where no other client has idKey pending. */
    private Worker pickWorkerFreeOf(String idKey, Client c) {
        int n = workers.size();
        for (int i = 0; i < n; i++) {
            int idx = (rrNext + i) % n;
            Worker w = workers.get(idx);
            if (w.state == WState.RUNNING && w.inc != null && !idHeldByOther(w, idKey, c)) {
                rrNext = (idx + 1) % n;
                return w;
            }
        }
        return null;
    }

    private Worker pickWorker() {
        int n = workers.size();
        for (int i = 0; i < n; i++) {
            int idx = (rrNext + i) % n;
            Worker w = workers.get(idx);
            if (w.state == WState.RUNNING && w.inc != null) {
                rrNext = (idx + 1) % n;
                return w;
            }
        }
        return null;
    }

    private static String describe(Json.Routing r) {
        StringBuilder sb = new StringBuilder("[");
        if (r.hasId) sb.append("id=").append(r.idText);
        if (r.method != null) sb.append(sb.length() > 1 ? " " : "").append("method=").append(r.method);
        if (r.sessionId != null) sb.append(sb.length() > 1 ? " " : "").append("sessionId=").append(r.sessionId);
        if (r.hasResult) sb.append(sb.length() > 1 ? " " : "").append("result");
        if (r.hasError) sb.append(sb.length() > 1 ? " " : "").append("error");
        return sb.append("]").toString();
    }

    // ================================================================ routing: worker -> client (6.3)

    private void onWorkerLine(Incarnation inc, byte[] b, int off, int len) {
        if (inc.discardOutput || inc.finalized) return;
        if (Json.isBlank(b, off, len)) return;
        Json.Routing r;
        try {
            r = Json.scanMessage(b, off, len);
        } catch (Json.ParseException e) {
            Log.error(inc.name() + ": malformed JSON on stdout (" + e.getMessage() + ")");
            failWorker(inc, "malformed JSON");
            return;
        }
        if (!r.isObject || r.bad != null) {
            Log.warn(inc.name() + ": unroutable message ("
                    + (r.bad != null ? r.bad : "not a JSON object") + "); discarded");
            return;
        }
        byte[] msg = Arrays.copyOfRange(b, off, off + len + 1);
        msg[len] = '\n';
        Worker w = inc.w;
        if (r.isResponseShaped() && r.hasId) {
            ArrayDeque<Pending> dq = w.pending.get(r.idKey);
            if (dq == null || dq.isEmpty()) {
                Log.warn(inc.name() + ": response " + describe(r) + " matches no pending request; discarded");
                return;
            }
            Pending chosen = null;
            if (r.sessionId != null && dq.size() > 1) {
                for (Pending p : dq) if (r.sessionId.equals(p.sessionId)) { chosen = p; break; }
            }
            if (chosen == null) chosen = dq.peekFirst();
            removePending(chosen);
            if (Log.on(Log.DEBUG)) Log.debug(inc.name() + " -> " + chosen.client.name() + ": response " + describe(r));
            deliver(inc, chosen.client, msg);
            afterPendingRemoved(chosen.client);
        } else if (r.sessionId != null) {
            Session s = sessions.get(r.sessionId);
            if (s == null) {
                Log.warn(inc.name() + ": message " + describe(r) + " for unknown session; discarded");
                return;
            }
            if (Log.on(Log.DEBUG)) Log.debug(inc.name() + " -> " + s.owner.name() + ": " + describe(r));
            deliver(inc, s.owner, msg);
        } else {
            Log.warn(inc.name() + ": unroutable message " + describe(r) + " (no id with result/error, no sessionId); discarded");
        }
    }

    private void removePending(Pending p) {
        ArrayDeque<Pending> dq = p.worker.pending.get(p.idKey);
        if (dq != null) {
            dq.remove(p);
            if (dq.isEmpty()) p.worker.pending.remove(p.idKey);
        }
        p.client.pending.remove(p);
        pendingTotal--;
    }

    private void afterPendingRemoved(Client c) {
        if (c instanceof StdioClient) stdioLingerCheck((StdioClient) c);
    }

    // ================================================================ worker lifecycle (5.3, 7.1)

    private void spawn(Worker w) {
        w.restartTimer = null;
        if (shuttingDown) return;
        w.state = WState.STARTING;
        List<String> cmd = new ArrayList<>();
        cmd.add(w.pool.command);
        cmd.addAll(w.pool.args);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process p;
        try {
            p = pb.start();
        } catch (IOException | RuntimeException e) {
            Log.error("worker " + w.wid + " (pool " + w.pool.id + "): spawn failed: " + e.getMessage());
            w.state = WState.STOPPED;
            restartPolicy(w);
            return;
        }
        Incarnation inc = new Incarnation(w, p);
        w.inc = inc;
        inc.io.startWriter(p.getOutputStream(), "javabus-w" + w.wid + "-stdin");
        inc.io.startReader(p.getInputStream(), "javabus-w" + w.wid + "-stdout");
        p.onExit().whenComplete((proc, ex) -> {
            int code;
            try { code = p.exitValue(); } catch (RuntimeException e) { code = -1; }
            final int fc = code;
            post(() -> onProcessExit(inc, fc));
        });
        w.state = WState.RUNNING;
        Log.info(inc.name() + ": started (" + w.pool.command + ")");
    }

    /** 5.3 and other worker faults: invalidate sessions, SIGTERM, restart later. */
    private void failWorker(Incarnation inc, String reason) {
        Worker w = inc.w;
        if (inc.finalized || w.inc != inc || w.state != WState.RUNNING) return;
        inc.discardOutput = true;
        invalidateWorkerSessions(w);
        w.state = WState.STOPPING;
        Log.warn(inc.name() + ": terminating (SIGTERM): " + reason);
        detachBackpressure(inc);
        inc.paused = false;
        inc.io.resume(); // keep draining its stdout (discarded) so it can exit cleanly
        inc.proc.toHandle().destroy();
        inc.killTimer = schedule(secToMs(cfg.drainTimeoutSec), () -> {
            if (!inc.exited) {
                Log.warn(inc.name() + ": did not exit after SIGTERM; sending SIGKILL");
                inc.proc.toHandle().destroyForcibly();
            }
        });
    }

    private void onProcessExit(Incarnation inc, int code) {
        inc.exited = true;
        inc.exitCode = code;
        String how = code > 128 && code < 160 ? "exit status " + code + " (signal " + (code - 128) + ")" : "exit status " + code;
        if (shuttingDown) Log.info(inc.name() + ": exited, " + how);
        else Log.warn(inc.name() + ": exited, " + how);
        if (inc.stdoutEOF) finalizeIncarnation(inc);
        else inc.eofTimer = schedule(EOF_AFTER_EXIT_GRACE_MS, () -> finalizeIncarnation(inc));
    }

    /** 7.1.2 cleanup. */
    private void finalizeIncarnation(Incarnation inc) {
        if (inc.finalized) return;
        inc.finalized = true;
        inc.dead = true;
        if (inc.killTimer != null) inc.killTimer.cancel();
        if (inc.eofTimer != null) inc.eofTimer.cancel();
        Worker w = inc.w;
        w.state = WState.STOPPED;
        inc.io.closeOutput();
        inc.io.stopReader();
        try { inc.proc.getInputStream().close(); } catch (IOException ignored) { }
        invalidateWorkerSessions(w);
        List<Pending> ps = new ArrayList<>();
        for (ArrayDeque<Pending> dq : w.pending.values()) ps.addAll(dq);
        for (Pending p : ps) {
            Log.warn(inc.name() + ": discarding pending request id=" + p.idText + " from " + p.client.name());
            removePending(p);
        }
        w.pending.clear();
        if (w.inc == inc) w.inc = null;
        detachBackpressure(inc); // may resume clients: done after the tables are clean
        Set<Client> touched = new LinkedHashSet<>();
        for (Pending p : ps) touched.add(p.client);
        for (Client c : touched) afterPendingRemoved(c);
        if (shuttingDown) {
            checkWorkersGone();
        } else {
            restartPolicy(w);
        }
    }

    private void invalidateWorkerSessions(Worker w) {
        for (String sid : w.sessionIds) {
            Session s = sessions.remove(sid);
            if (s != null) {
                s.owner.ownedSessions.remove(sid);
                Log.debug("session \"" + sid + "\" invalidated (" + w.name() + " stopped)");
            }
        }
        w.sessionIds.clear();
    }

    /** 7.1.3: exponential backoff, at most max_restarts restarts within restart_window_sec. */
    private void restartPolicy(Worker w) {
        if (shuttingDown) return;
        long t = now();
        long window = secToMs(cfg.restartWindowSec);
        while (!w.restartTimes.isEmpty() && t - w.restartTimes.peekFirst() >= window) w.restartTimes.pollFirst();
        int k = w.restartTimes.size();
        if (k >= cfg.maxRestarts) {
            w.givenUp = true;
            Log.error(w.name() + ": max_restarts=" + cfg.maxRestarts + " exceeded within restart_window_sec="
                    + cfg.restartWindowSec + "; not restarting");
            return;
        }
        long delay = RESTART_BASE_MS << Math.min(k, 20);
        if (delay > RESTART_CAP_MS) delay = RESTART_CAP_MS;
        w.restartTimes.addLast(t);
        Log.info(w.name() + ": restarting in " + delay + " ms (restart " + (k + 1) + " of at most "
                + cfg.maxRestarts + " within " + cfg.restartWindowSec + " s)");
        w.restartTimer = schedule(delay, () -> spawn(w));
    }

    // ================================================================ clients (7.2)

    private void closeClient(Client c, String reason) {
        if (c.closed) return;
        c.closed = true;
        c.dead = true;
        c.inputDone = true;
        Log.info(c.name() + " disconnected: " + reason);
        for (String sid : c.ownedSessions) {
            Session s = sessions.remove(sid);
            if (s != null) {
                s.worker.sessionIds.remove(sid);
                Log.debug("session \"" + sid + "\" invalidated (owner disconnected)");
            }
        }
        c.ownedSessions.clear();
        int np = c.pending.size();
        for (Pending p : new ArrayList<>(c.pending)) removePending(p);
        if (np > 0) Log.debug(c.name() + ": discarded " + np + " pending request(s)");
        detachBackpressure(c);
        c.closeIO();
        clients.remove(c.cid);
        if (c instanceof StdioClient && !shuttingDown) beginShutdown("stdio client closed", false);
    }

    /** G2: stdin EOF in stdio mode; shut down once no request of the client is pending. */
    private void stdioLingerCheck(StdioClient c) {
        if (c.closed || !c.inputDone || shuttingDown) return;
        if (c.paused) return; // still has buffered lines to dispatch
        if (c.pending.isEmpty()) {
            beginShutdown("stdin closed and no request pending", false);
        } else if (drainTimer == null) {
            Log.info(c.name() + ": waiting up to drain_timeout_sec=" + cfg.drainTimeoutSec + " for "
                    + c.pending.size() + " pending response(s)");
            drainTimer = schedule(secToMs(cfg.drainTimeoutSec), () -> {
                drainTimer = null;
                if (!shuttingDown) beginShutdown("drain timeout after stdin EOF", false);
            });
        }
    }

    // ================================================================ graceful shutdown (10)

    private void beginShutdown(String reason, boolean signal) {
        if (shuttingDown) {
            if (signal && !flushing) {
                Log.warn(reason + " during shutdown: killing remaining workers now");
                killRemaining();
            }
            return;
        }
        shuttingDown = true;
        if (drainTimer != null) { drainTimer.cancel(); drainTimer = null; }
        Log.info("graceful shutdown: " + reason);
        cleanupListener();
        for (Client c : clients.values()) {
            c.inputDone = true;
            if (c instanceof SocketClient) ((SocketClient) c).updateInterest();
            else ((StdioClient) c).io.stopReader();
        }
        for (Worker w : workers) {
            if (w.restartTimer != null) { w.restartTimer.cancel(); w.restartTimer = null; }
            Incarnation inc = w.inc;
            if (inc != null && !inc.exited) {
                if (w.state == WState.RUNNING) w.state = WState.STOPPING;
                inc.proc.toHandle().destroy();
                Log.debug(inc.name() + ": SIGTERM sent");
            }
        }
        drainTimer = schedule(secToMs(cfg.drainTimeoutSec), () -> {
            drainTimer = null;
            boolean any = false;
            for (Worker w : workers) if (w.inc != null && !w.inc.exited) any = true;
            if (any) {
                Log.warn("drain_timeout_sec=" + cfg.drainTimeoutSec + " elapsed; killing remaining workers");
                killRemaining();
            }
        });
        checkWorkersGone();
    }

    private void killRemaining() {
        for (Worker w : workers) {
            Incarnation inc = w.inc;
            if (inc != null && !inc.exited) {
                Log.warn(inc.name() + ": SIGKILL");
                inc.proc.toHandle().destroyForcibly();
            }
        }
        // if exits are not reported promptly, proceed anyway
        schedule(EOF_AFTER_EXIT_GRACE_MS + 500, this::startFlush);
    }

    private void checkWorkersGone() {
        if (!shuttingDown || flushing) return;
        for (Worker w : workers) if (w.inc != null) return;
        startFlush();
    }

    private void startFlush() {
        if (flushing) return;
        flushing = true;
        if (drainTimer != null) { drainTimer.cancel(); drainTimer = null; }
        for (Worker w : workers) {
            if (w.inc != null) {
                w.inc.io.stopReader();
                w.inc.io.closeOutput();
            }
        }
        flushDeadline = now() + FLUSH_GRACE_MS;
        checkFlushDone();
    }

    private void checkFlushDone() {
        boolean empty = true;
        for (Client c : clients.values()) if (c.queued() > 0) empty = false;
        if (!empty && now() < flushDeadline) return;
        for (Client c : new ArrayList<>(clients.values())) {
            c.closed = true;
            c.dead = true;
            c.closeIO();
        }
        if (stdoutWriter != null) {
            // let the stdout writer write what it holds and close stdout
            long left = Math.max(flushDeadline - now(), 200);
            try { stdoutWriter.join(left); } catch (InterruptedException ignored) { }
        }
        clients.clear();
        cleanupListener();
        try { selector.close(); } catch (IOException ignored) { }
        done = true;
    }
}
