import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * End-to-end tests for javabus. Starts the real daemon (../javabus) with test/worker.pl
 * workers and checks behaviour through stdio, TCP and Unix sockets. Waits are always
 * "wait for an event with a deadline", never fixed sleeps.
 */
public class BusTest {
    static Path ROOT, WORKER, TMP;
    static int passed, failed;
    static final List<String> failures = new ArrayList<>();
    static final String EOF = "\u0000EOF";

    // ------------------------------------------------------------------ helpers

    static void check(boolean c, String msg) { if (!c) throw new AssertionError(msg); }

    static String cfg(String poolsJson, String limitsJson) {
        return "{\"pools\":" + poolsJson + (limitsJson != null ? ",\"limits\":" + limitsJson : "") + "}";
    }

    static String pool(String id, int n, String... args) {
        StringBuilder sb = new StringBuilder("{\"id\":\"" + id + "\",\"command\":\"" + WORKER + "\",\"args\":[");
        for (int i = 0; i < args.length; i++) sb.append(i > 0 ? "," : "").append("\"").append(args[i]).append("\"");
        return sb.append("],\"instances\":").append(n).append("}").toString();
    }

    static Path writeCfg(String json) throws IOException {
        Path p = Files.createTempFile(TMP, "cfg", ".json");
        Files.writeString(p, json);
        return p;
    }

    /** Reads lines (split on \n only) into a queue; EOF marker at end. */
    static Thread pump(InputStream in, BlockingQueue<String> q, List<String> all, String name) {
        Thread t = new Thread(() -> {
            ByteArrayOutputStream cur = new ByteArrayOutputStream();
            byte[] buf = new byte[65536];
            try {
                int n;
                while ((n = in.read(buf)) > 0) {
                    for (int i = 0; i < n; i++) {
                        if (buf[i] == '\n') {
                            String s = cur.toString(StandardCharsets.UTF_8);
                            cur.reset();
                            if (all != null) all.add(s);
                            q.add(s);
                        } else cur.write(buf[i]);
                    }
                }
            } catch (IOException ignored) { }
            q.add(EOF);
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    static String jsonStr(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\":(\"(?:[^\"\\\\]|\\\\.)*\"|-?[0-9.eE+-]+)").matcher(json);
        return m.find() ? m.group(1) : null;
    }

    static final class Daemon {
        final Process p;
        final BlockingQueue<String> out = new LinkedBlockingQueue<>();
        final BlockingQueue<String> err = new LinkedBlockingQueue<>();
        final List<String> errAll = Collections.synchronizedList(new ArrayList<>());
        final List<String> outAll = Collections.synchronizedList(new ArrayList<>());
        final OutputStream stdin;
        final Thread errPump, outPump;

        Daemon(Path cfg, String... mode) throws IOException {
            List<String> cmd = new ArrayList<>();
            cmd.add(ROOT.resolve("javabus").toString());
            cmd.add("--config");
            cmd.add(cfg.toString());
            Collections.addAll(cmd, mode);
            p = new ProcessBuilder(cmd).start();
            stdin = p.getOutputStream();
            outPump = pump(p.getInputStream(), out, outAll, "d-out");
            errPump = pump(p.getErrorStream(), err, errAll, "d-err");
        }

        void send(String line) throws IOException {
            stdin.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            stdin.flush();
        }

        void closeStdin() throws IOException { stdin.close(); }

        String readOut(long ms) throws InterruptedException {
            String s = out.poll(ms, TimeUnit.MILLISECONDS);
            check(s != null, "timeout waiting for stdout line");
            return s;
        }

        /** Waits until a log line (new or already seen) matches regex; returns it. */
        String waitLog(String regex, long ms) throws InterruptedException {
            return waitLogCount(regex, 1, ms);
        }

        String waitLogCount(String regex, int count, long ms) throws InterruptedException {
            Pattern pt = Pattern.compile(regex);
            long deadline = System.currentTimeMillis() + ms;
            while (true) {
                String last = null;
                int n = 0;
                synchronized (errAll) {
                    for (String l : errAll) if (pt.matcher(l).find()) { n++; last = l; }
                }
                if (n >= count) return last;
                long left = deadline - System.currentTimeMillis();
                check(left > 0, "timeout waiting for log /" + regex + "/ x" + count + " (saw " + n + ")");
                err.poll(Math.min(left, 200), TimeUnit.MILLISECONDS);
            }
        }

        int countLog(String regex) {
            Pattern pt = Pattern.compile(regex);
            int n = 0;
            synchronized (errAll) { for (String l : errAll) if (pt.matcher(l).find()) n++; }
            return n;
        }

        int waitExit(long ms) throws InterruptedException {
            check(p.waitFor(ms, TimeUnit.MILLISECONDS), "daemon did not exit within " + ms + " ms");
            errPump.join(2000); // all of stderr has been collected
            outPump.join(2000);
            return p.exitValue();
        }

        int tcpPort() throws InterruptedException {
            String l = waitLog("listening on tcp ", 10000);
            Matcher m = Pattern.compile(":(\\d+)$").matcher(l);
            check(m.find(), "no port in " + l);
            return Integer.parseInt(m.group(1));
        }

        void kill() { p.destroyForcibly(); }
    }

    static final class Conn {
        final OutputStream os;
        final BlockingQueue<String> in = new LinkedBlockingQueue<>();
        final Object sock;

        final InputStream is;

        /** rcvbuf > 0: small receive buffer and the connection is NOT read until startReading(). */
        Conn(int port, int rcvbuf) throws IOException {
            Socket s = new Socket();
            if (rcvbuf > 0) s.setReceiveBufferSize(rcvbuf);
            s.connect(new InetSocketAddress("127.0.0.1", port));
            sock = s;
            os = s.getOutputStream();
            is = s.getInputStream();
            if (rcvbuf <= 0) startReading();
        }

        void startReading() { pump(is, in, null, "c-in"); }

        Conn(int port) throws IOException { this(port, 0); }

        Conn(Path unix) throws IOException {
            SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            ch.connect(UnixDomainSocketAddress.of(unix));
            sock = ch;
            // not Channels.newInputStream/newOutputStream: those serialize read and write on one lock
            os = new OutputStream() {
                @Override public void write(int b) throws IOException { write(new byte[]{(byte) b}, 0, 1); }
                @Override public void write(byte[] b, int off, int len) throws IOException {
                    java.nio.ByteBuffer bb = java.nio.ByteBuffer.wrap(b, off, len);
                    while (bb.hasRemaining()) ch.write(bb);
                }
            };
            is = new InputStream() {
                @Override public int read() throws IOException {
                    byte[] one = new byte[1];
                    return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
                }
                @Override public int read(byte[] b, int off, int len) throws IOException {
                    return ch.read(java.nio.ByteBuffer.wrap(b, off, len));
                }
            };
            startReading();
        }

        void send(String line) throws IOException { sendRaw((line + "\n").getBytes(StandardCharsets.UTF_8)); }

        void sendRaw(byte[] b) throws IOException { os.write(b); os.flush(); }

        String read(long ms) throws InterruptedException {
            String s = in.poll(ms, TimeUnit.MILLISECONDS);
            check(s != null, "timeout waiting for client line");
            check(!s.equals(EOF), "unexpected EOF on client connection");
            return s;
        }

        void expectClosed(long ms) throws InterruptedException {
            long deadline = System.currentTimeMillis() + ms;
            while (true) {
                long left = deadline - System.currentTimeMillis();
                check(left > 0, "connection not closed by daemon");
                String s = in.poll(left, TimeUnit.MILLISECONDS);
                if (EOF.equals(s)) return;
            }
        }

        void close() {
            try {
                if (sock instanceof Socket) ((Socket) sock).close(); else ((SocketChannel) sock).close();
            } catch (IOException ignored) { }
        }
    }

    interface Body { void run() throws Exception; }

    static final List<Daemon> live = new ArrayList<>();

    static Daemon start(String cfgJson, String... mode) throws IOException {
        Daemon d = new Daemon(writeCfg(cfgJson), mode);
        live.add(d);
        return d;
    }

    static String FILTER;

    static void test(String name, Body b) {
        if (FILTER != null && !name.contains(FILTER)) return;
        long t0 = System.currentTimeMillis();
        try {
            b.run();
            passed++;
            System.out.printf("PASS %-48s %5d ms%n", name, System.currentTimeMillis() - t0);
        } catch (Throwable t) {
            failed++;
            failures.add(name);
            System.out.printf("FAIL %-48s %s%n", name, t);
            for (Daemon d : live) {
                System.out.println("  --- daemon stderr:");
                try { d.errPump.join(500); } catch (InterruptedException ignored) { }
                synchronized (d.errAll) { for (String l : d.errAll) System.out.println("  | " + l); }
            }
        } finally {
            for (Daemon d : live) d.kill();
            live.clear();
        }
    }

    // ------------------------------------------------------------------ tests

    public static void main(String[] args) throws Exception {
        ROOT = Paths.get(args.length > 0 ? args[0] : "..").toAbsolutePath().normalize();
        WORKER = ROOT.resolve("test/worker.pl");
        FILTER = args.length > 1 ? args[1] : null;
        Files.createDirectories(ROOT.resolve("test/tmp"));
        TMP = Files.createTempDirectory(ROOT.resolve("test/tmp"), "run");

        test("stdio: request/response, byte-exact pass-through", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null));
            String req = "{ \"jsonrpc\":\"2.0\",  \"id\" : 1,\"method\":\"hello\",\"params\":{\"s\":\"\\u00e9 é\\\"/\"} }";
            d.send(req);
            String r = d.readOut(10000);
            check("1".equals(field(r, "id")), "id: " + r);
            check(r.contains("\"raw\":" + jsonStr(req)), "worker did not receive the exact bytes: " + r);
            d.send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"rawreply\"}");
            String rr = d.readOut(5000);
            check(rr.equals("{ \"id\" : 2 ,\"result\":{\"k\":\"\\u00e9\\u20ac\",\"x\":[1,2.50,-0e0]}  }"),
                    "worker output modified: " + rr);
            d.send("");
            d.send("   ");
            d.send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
            d.send("{\"jsonrpc\":\"2.0\",\"id\":\"three\",\"method\":\"sleep\",\"params\":{\"ms\":300}}");
            d.closeStdin();
            String r3 = d.readOut(5000);
            check("\"three\"".equals(field(r3, "id")), "pending response after EOF: " + r3);
            check(d.waitExit(10000) == 0, "exit code");
            check(d.outAll.size() == 3, "stdout must carry exactly the 3 responses, got " + d.outAll);
            d.waitLog("graceful shutdown", 1000);
        });

        test("stdio: round-robin over workers of all pools", () -> {
            Daemon d = start(cfg("[" + pool("a", 2, "--quiet") + "," + pool("b", 1, "--quiet") + "]", null));
            List<String> pids = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                d.send("{\"jsonrpc\":\"2.0\",\"id\":" + i + ",\"method\":\"who\"}");
                String r = d.readOut(10000);
                check(String.valueOf(i).equals(field(r, "id")), "order/id " + r);
                pids.add(field(r, "pid"));
            }
            check(new HashSet<>(pids.subList(0, 3)).size() == 3, "3 distinct workers first: " + pids);
            check(pids.subList(0, 3).equals(pids.subList(3, 6)), "cyclic order: " + pids);
            d.closeStdin();
            check(d.waitExit(10000) == 0, "exit code");
        });

        test("stdio: session affinity and worker notifications", () -> {
            Daemon d = start(cfg("[" + pool("p", 3, "--quiet") + "]", null));
            d.send("{\"id\":1,\"method\":\"who\",\"sessionId\":\"s1\"}");
            String a = field(d.readOut(10000), "pid");
            for (int i = 2; i < 8; i++) {
                d.send("{\"id\":" + i + ",\"method\":\"who\"}");
                d.readOut(5000);
                d.send("{\"id\":\"s" + i + "\",\"method\":\"who\",\"sessionId\":\"s1\"}");
                check(a.equals(field(d.readOut(5000), "pid")), "session s1 moved");
            }
            d.send("{\"id\":100,\"method\":\"notify\",\"sessionId\":\"s2\"}");
            String n = d.readOut(5000);
            String r = d.readOut(5000);
            check(n.contains("\"method\":\"progress\"") && n.contains("\"sessionId\":\"s2\""), "notification: " + n);
            check("100".equals(field(r, "id")), "response after notification: " + r);
            d.send("{\"id\":101,\"method\":\"badsession\"}");
            check("101".equals(field(d.readOut(5000), "id")), "resp 101");
            d.waitLog("WARN .*unknown session; discarded", 5000);
            d.send("{\"id\":102,\"method\":\"orphan\"}");
            check("102".equals(field(d.readOut(5000), "id")), "resp 102");
            d.waitLog("WARN .*matches no pending request; discarded", 5000);
            d.waitLog("WARN .*unroutable message", 5000);
            d.closeStdin();
            check(d.waitExit(10000) == 0, "exit code");
        });

        test("tcp: two clients using the same id", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null), "--tcp", "127.0.0.1:0");
            int port = d.tcpPort();
            Conn a = new Conn(port), b = new Conn(port);
            a.send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sleep\",\"params\":{\"ms\":300}}");
            d.waitLog("client 1 .*connected", 5000);
            b.send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"fast\"}");
            String ra = a.read(5000), rb = b.read(5000);
            check(ra.contains("\"method\":\"sleep\"") && "7".equals(field(ra, "id")), "A got " + ra);
            check(rb.contains("\"method\":\"fast\"") && "7".equals(field(rb, "id")), "B got " + rb);
            // string "7" and number 7 are different ids; 1.0 and 1 are the same id
            a.send("{\"id\":\"7\",\"method\":\"sleep\",\"params\":{\"ms\":200}}");
            b.send("{\"id\":7,\"method\":\"num\"}");
            check(a.read(5000).contains("\"method\":\"sleep\""), "A string id");
            check(b.read(5000).contains("\"method\":\"num\""), "B number id");
            a.send("{\"id\":1.0,\"method\":\"float\"}");
            String rf = a.read(5000);
            check(rf.contains("\"method\":\"float\"") && "1".equals(field(rf, "id")), "1.0 ~ 1: " + rf);
            check(a.in.isEmpty() && b.in.isEmpty(), "no stray messages");
            d.p.toHandle().destroy();
            check(d.waitExit(10000) == 0, "exit code after SIGTERM");
            a.expectClosed(2000);
        });

        test("tcp: session ownership (non-owner uses session)", () -> {
            Daemon d = start(cfg("[" + pool("p", 2, "--quiet") + "]", null), "--tcp", "127.0.0.1:0");
            int port = d.tcpPort();
            Conn a = new Conn(port), b = new Conn(port);
            a.send("{\"id\":1,\"method\":\"who\",\"sessionId\":\"S\"}");
            String pa = field(a.read(5000), "pid");
            b.send("{\"id\":1,\"method\":\"notify\",\"sessionId\":\"S\"}");
            String rb = b.read(5000);
            check(pa.equals(field(rb, "pid")) && rb.contains("\"method\":\"notify\""), "routed to session worker: " + rb);
            String na = a.read(5000);
            check(na.contains("\"method\":\"progress\""), "notification goes to the session owner: " + na);
        });

        test("tcp: malformed client input closes only that client", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null), "--tcp", "127.0.0.1:0");
            int port = d.tcpPort();
            String[] bad = {"not json", "[1,2]", "{\"id\":{\"a\":1},\"method\":\"x\"}",
                    "{\"id\":1,\"method\":\"x\",\"sessionId\":5}", "{\"id\":1,\"method\":\"x\"} trailing",
                    "{\"id\":1,\"id\":2,\"method\":\"x\"}", "{\"id\":true}", "{\"a\":01}"};
            Conn good = new Conn(port);
            for (String s : bad) {
                Conn c = new Conn(port);
                c.send(s);
                c.expectClosed(5000);
            }
            Conn u = new Conn(port);
            u.sendRaw(new byte[]{'{', '"', 'm', '"', ':', '"', (byte) 0xC0, (byte) 0xAF, '"', '}', '\n'});
            u.expectClosed(5000);
            String longSid = "x".repeat(257);
            Conn l = new Conn(port);
            l.send("{\"id\":1,\"method\":\"x\",\"sessionId\":\"" + longSid + "\"}");
            l.expectClosed(5000);
            good.send("");
            good.send("{\"id\":1,\"method\":\"x\",\"sessionId\":\"" + "y".repeat(256) + "\"}");
            check("1".equals(field(good.read(5000), "id")), "good client still served");
            check(d.countLog("WARN .*not valid JSON") >= 3, "parse warnings logged");
            check(d.countLog("WARN .*cannot extract routing fields") >= 4, "routing warnings logged");
        });

        test("worker malformed output: sessions invalidated, restart", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null), "--tcp", "127.0.0.1:0", "--log-level", "debug");
            Conn c = new Conn(d.tcpPort());
            c.send("{\"id\":1,\"method\":\"who\",\"sessionId\":\"s1\"}");
            String p1 = field(c.read(5000), "pid");
            c.send("{\"id\":2,\"method\":\"garbage\",\"sessionId\":\"s1\"}");
            d.waitLog("ERROR .*malformed JSON on stdout", 5000);
            d.waitLog("session \"s1\" invalidated", 5000);
            d.waitLog("discarding pending request id=2", 5000);
            d.waitLogCount("INFO .*started", 2, 5000);
            c.send("{\"id\":3,\"method\":\"who\",\"sessionId\":\"s1\"}");
            String p2 = field(c.read(5000), "pid");
            check(!p1.equals(p2), "new worker process expected");
            check(d.countLog("session \"s1\" created") == 2, "session re-created");
        });

        test("worker crash: pending discarded, restart with backoff, limit", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]",
                    "{\"max_restarts\":3,\"restart_window_sec\":60}"));
            d.send("{\"id\":5,\"method\":\"crash\"}");
            d.waitLog("WARN .*discarding pending request id=5", 5000);
            d.waitLog("restarting in 100 ms", 5000);
            d.waitLogCount("INFO .*started", 2, 5000);
            d.send("{\"id\":6,\"method\":\"who\"}");
            check("6".equals(field(d.readOut(5000), "id")), "served after restart");
            d.send("{\"id\":7,\"method\":\"crash\"}");
            d.waitLog("restarting in 200 ms", 5000);
            d.waitLogCount("INFO .*started", 3, 5000);
            d.send("{\"id\":8,\"method\":\"crash\"}");
            d.waitLog("restarting in 400 ms", 5000);
            d.waitLogCount("INFO .*started", 4, 5000);
            d.send("{\"id\":9,\"method\":\"crash\"}");
            d.waitLog("ERROR .*max_restarts=3 exceeded", 5000);
            d.send("{\"id\":10,\"method\":\"who\"}");
            d.waitLog("WARN .*no worker available", 5000);
            d.closeStdin();
            check(d.waitExit(10000) == 0, "exit code");
            check(d.countLog("INFO .*started") == 4, "exactly 3 restarts");
        });

        test("worker dying at start: restart limit reached", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--die-immediately", "--quiet") + "]",
                    "{\"max_restarts\":2}"), "--tcp", "127.0.0.1:0");
            d.waitLog("ERROR .*max_restarts=2 exceeded", 8000);
            check(d.countLog("INFO .*started") == 3, "1 start + 2 restarts");
            d.p.toHandle().destroy();
            check(d.waitExit(10000) == 0, "exit code");
        });

        test("input buffer limits (client and worker)", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", "{\"max_input_buffer\":1000}"),
                    "--tcp", "127.0.0.1:0");
            int port = d.tcpPort();
            Conn ok = new Conn(port);
            String head = "{\"id\":1,\"method\":\"small\",\"params\":\"";
            String exact = head + "a".repeat(1000 - head.length() - 2) + "\"}";
            check(exact.length() == 1000, "len");
            ok.send(exact);
            check("1".equals(field(ok.read(5000), "id")), "1000-byte message accepted");
            Conn big = new Conn(port);
            big.sendRaw(("{\"id\":1,\"method\":\"x\",\"params\":\"" + "b".repeat(3000)).getBytes(StandardCharsets.UTF_8));
            big.expectClosed(5000);
            d.waitLog("ERROR .*input buffer overflow", 5000);
            ok.send("{\"id\":2,\"method\":\"big\",\"params\":{\"n\":5000}}");
            d.waitLog("ERROR .*stdout input buffer overflow", 5000);
            d.waitLogCount("INFO .*started", 2, 5000);
            ok.send("{\"id\":3,\"method\":\"x\"}");
            check("3".equals(field(ok.read(5000), "id")), "served after worker restart");
        });

        test("backpressure: slow client paused then released", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]",
                    "{\"max_output_queue\":65536,\"backpressure_timeout_sec\":30}"), "--tcp", "127.0.0.1:0");
            Conn c = new Conn(d.tcpPort(), 4096);
            int n = 40;
            StringBuilder sb = new StringBuilder();
            for (int i = 1; i <= n; i++) sb.append("{\"id\":").append(i).append(",\"method\":\"big\",\"params\":{\"n\":100000}}\n");
            c.sendRaw(sb.toString().getBytes(StandardCharsets.UTF_8));
            d.waitLog("WARN .*output queue exceeds max_output_queue", 10000);
            c.startReading();
            Set<String> ids = new HashSet<>();
            for (int i = 0; i < n; i++) {
                String r = c.read(20000);
                ids.add(field(r, "id"));
                check(r.length() > 100000, "full message");
            }
            check(ids.size() == n, "all responses delivered once");
            d.waitLog("INFO .*releasing backpressure", 5000);
        });

        test("backpressure timeout closes stalled client", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]",
                    "{\"max_output_queue\":65536,\"backpressure_timeout_sec\":1}"), "--tcp", "127.0.0.1:0");
            int port = d.tcpPort();
            Conn c = new Conn(port, 4096);
            StringBuilder sb = new StringBuilder();
            for (int i = 1; i <= 120; i++) sb.append("{\"id\":").append(i).append(",\"method\":\"big\",\"params\":{\"n\":100000}}\n");
            c.sendRaw(sb.toString().getBytes(StandardCharsets.UTF_8));
            d.waitLog("WARN .*output queue exceeds", 10000);
            d.waitLog("ERROR javabus: client 1 .*backpressure_timeout_sec", 10000);
            d.waitLog("client 1 .*disconnected: backpressure timeout", 5000);
            Conn c2 = new Conn(port);
            c2.send("{\"id\":1,\"method\":\"x\"}");
            check("1".equals(field(c2.read(10000), "id")), "daemon still serves");
        });

        test("backpressure on worker stdin, timeout terminates worker", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]",
                    "{\"max_output_queue\":65536,\"backpressure_timeout_sec\":1}"), "--tcp", "127.0.0.1:0");
            Conn c = new Conn(d.tcpPort());
            c.send("{\"id\":1,\"method\":\"stall\"}");
            String pad = "z".repeat(10000);
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < 40; i++) sb.append("{\"method\":\"note\",\"params\":\"").append(pad).append("\"}\n");
            c.sendRaw(sb.toString().getBytes(StandardCharsets.UTF_8));
            d.waitLog("WARN javabus: worker 0 .*output queue exceeds", 10000);
            d.waitLog("terminating \\(SIGTERM\\): backpressure timeout", 10000);
            d.waitLogCount("INFO .*started", 2, 10000);
            // the client was paused, is resumed, and its remaining notifications flow to the new worker
            c.send("{\"id\":2,\"method\":\"x\"}");
            check("2".equals(field(c.read(10000), "id")), "served after worker restart");
        });

        test("client disconnect invalidates sessions and pending", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null),
                    "--tcp", "127.0.0.1:0", "--log-level", "debug");
            int port = d.tcpPort();
            Conn a = new Conn(port);
            a.send("{\"id\":1,\"method\":\"sleep\",\"params\":{\"ms\":400},\"sessionId\":\"s1\"}");
            d.waitLog("session \"s1\" created", 5000);
            a.close();
            d.waitLog("session \"s1\" invalidated \\(owner disconnected\\)", 5000);
            d.waitLog("WARN .*response \\[id=1 .*matches no pending request", 5000);
            Conn b = new Conn(port);
            b.send("{\"id\":2,\"method\":\"x\",\"sessionId\":\"s1\"}");
            check("2".equals(field(b.read(5000), "id")), "new owner served");
            check(d.countLog("session \"s1\" created") == 2, "session recreated for new client");
        });

        test("unix socket: serve, SIGTERM shutdown removes socket", () -> {
            Path sock = TMP.resolve("bus.sock");
            Daemon d = start(cfg("[" + pool("p", 2) + "]", null), "--unix", sock.toString());
            d.waitLog("listening on unix", 10000);
            Conn c = new Conn(sock);
            c.send("{\"id\":1,\"method\":\"x\"}");
            check("1".equals(field(c.read(5000), "id")), "served over unix socket");
            d.p.toHandle().destroy();
            check(d.waitExit(10000) == 0, "exit code");
            check(!Files.exists(sock), "socket file removed");
            check(d.countLog("INFO javabus: worker .*exited") == 2, "both workers exited");
            c.expectClosed(2000);
        });

        test("shutdown: SIGKILL after drain_timeout_sec", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--ignore-term", "--quiet") + "]",
                    "{\"drain_timeout_sec\":1}"), "--tcp", "127.0.0.1:0");
            d.tcpPort();
            d.waitLog("INFO .*started", 5000);
            long t0 = System.currentTimeMillis();
            d.p.toHandle().destroy();
            check(d.waitExit(10000) == 0, "exit code");
            long dt = System.currentTimeMillis() - t0;
            check(d.countLog("SIGKILL") >= 1, "SIGKILL logged");
            check(dt >= 900 && dt < 6000, "drain timing " + dt);
        });

        test("concurrent clients, same ids, mixed sessions: no cross-talk", () -> {
            Daemon d = start(cfg("[" + pool("p", 3, "--quiet") + "]", null), "--tcp", "127.0.0.1:0");
            int port = d.tcpPort();
            int nc = 4, nr = 300;
            Conn[] cs = new Conn[nc];
            for (int k = 0; k < nc; k++) cs[k] = new Conn(port);
            Thread[] ts = new Thread[nc];
            for (int k = 0; k < nc; k++) {
                final int kk = k;
                ts[k] = new Thread(() -> {
                    try {
                        StringBuilder sb = new StringBuilder();
                        for (int i = 0; i < nr; i++) {
                            sb.append("{\"jsonrpc\":\"2.0\",\"id\":").append(i).append(",\"method\":\"c").append(kk).append("\"");
                            if (i % 3 == 0) sb.append(",\"sessionId\":\"sess-").append(kk).append("-").append(i % 7).append("\"");
                            sb.append("}\n");
                            if (i % 50 == 49) { cs[kk].sendRaw(sb.toString().getBytes(StandardCharsets.UTF_8)); sb.setLength(0); }
                        }
                        cs[kk].sendRaw(sb.toString().getBytes(StandardCharsets.UTF_8));
                    } catch (IOException e) { throw new RuntimeException(e); }
                });
                ts[k].start();
            }
            for (Thread t : ts) t.join();
            for (int k = 0; k < nc; k++) {
                Set<String> ids = new HashSet<>();
                for (int i = 0; i < nr; i++) {
                    String r = cs[k].read(20000);
                    check(r.contains("\"method\":\"c" + k + "\""), "client " + k + " got a foreign response: " + r);
                    ids.add(field(r, "id"));
                }
                check(ids.size() == nr, "client " + k + " got " + ids.size() + " distinct ids");
            }
            check(d.countLog("WARN") == 0, "no warnings expected");
        });

        test("table limits: sessions and pending requests", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null), "--tcp", "127.0.0.1:0");
            Conn c = new Conn(d.tcpPort());
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < 1025; i++) sb.append("{\"method\":\"n\",\"sessionId\":\"S").append(i).append("\"}\n");
            for (int i = 0; i < 4097; i++) sb.append("{\"id\":").append(i).append(",\"method\":\"hold\"}\n");
            c.sendRaw(sb.toString().getBytes(StandardCharsets.UTF_8));
            d.waitLog("WARN .*session table full \\(STDIO_BUS_MAX_SESSIONS=1024\\); message \\[method=n sessionId=S1024\\]", 10000);
            d.waitLog("WARN .*pending request table full .*request \\[id=4096 method=hold\\]", 10000);
            check(d.countLog("table full") == 2, "exactly one message over each limit");
            c.send("{\"id\":\"x\",\"method\":\"who\",\"sessionId\":\"S5\"}");
            d.waitLog("WARN .*pending request table full .*id=\"x\"", 10000);
        });

        test("stdio: SIGTERM and malformed input both end with exit 0", () -> {
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null));
            d.send("{\"id\":1,\"method\":\"x\"}");
            d.readOut(10000);
            d.p.toHandle().destroy();
            check(d.waitExit(10000) == 0, "exit code on SIGTERM");
            d.waitLog("graceful shutdown: SIGTERM", 100);
            Daemon e = start(cfg("[" + pool("p", 1, "--quiet") + "]", null));
            e.send("{\"id\":1,\"method\":\"x\"}");
            e.readOut(10000);
            e.send("{oops");
            check(e.waitExit(10000) == 0, "exit code after malformed input");
            e.waitLog("WARN .*not valid JSON", 100);
            check(e.outAll.size() == 1, "stdout untouched");
        });

        test("unix socket in use is refused", () -> {
            Path sock = TMP.resolve("busy.sock");
            Daemon d = start(cfg("[" + pool("p", 1, "--quiet") + "]", null), "--unix", sock.toString());
            d.waitLog("listening on unix", 10000);
            Daemon d2 = start(cfg("[" + pool("p", 1, "--quiet") + "]", null), "--unix", sock.toString());
            check(d2.waitExit(10000) == 1, "second daemon must fail");
            check(Files.exists(sock), "first daemon's socket untouched");
            Conn c = new Conn(sock);
            c.send("{\"id\":1,\"method\":\"x\"}");
            check("1".equals(field(c.read(5000), "id")), "first daemon still serving");
        });

        test("configuration and CLI errors", () -> {
            String w = WORKER.toString();
            String[] badCfgs = {
                "not json", "{}", "{\"pools\":[]}", "[]",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"" + w + "\",\"instances\":0}]}",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"" + w + "\"}]}",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"/nonexistent/x\",\"instances\":1}]}",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"" + w + "\",\"instances\":1},{\"id\":\"a\",\"command\":\"" + w + "\",\"instances\":1}]}",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"" + w + "\",\"instances\":1}],\"limits\":{\"max_input_buffer\":-1}}",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"" + w + "\",\"instances\":1.5}]}",
                "{\"pools\":[{\"id\":\"a\",\"command\":\"" + w + "\",\"args\":[1],\"instances\":1}]}",
            };
            for (String c : badCfgs) {
                Daemon d = start(c);
                check(d.waitExit(10000) == 1, "config should be rejected with exit 1: " + c);
                check(d.outAll.isEmpty(), "nothing on stdout");
            }
            Daemon ok = start("{\"pools\":[{\"id\":\"a\",\"command\":\"cat\",\"instances\":1}],\"limits\":{}}", "--stdio");
            ok.closeStdin();
            check(ok.waitExit(10000) == 0, "PATH lookup + empty limits accepted");
            Path good = writeCfg(cfg("[" + pool("p", 1) + "]", null));
            String[][] badCli = {{}, {"--config"}, {"--config", good.toString(), "--tcp", "nope"},
                    {"--config", good.toString(), "--stdio", "--tcp", "127.0.0.1:0"}, {"--config", good.toString(), "--bogus"}};
            for (String[] a : badCli) {
                List<String> cmd = new ArrayList<>();
                cmd.add(ROOT.resolve("javabus").toString());
                Collections.addAll(cmd, a);
                Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
                p.getOutputStream().close();
                check(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 2, "usage error exit 2 for " + String.join(" ", a));
            }
        });

        try (var walk = Files.walk(TMP)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(q -> q.toFile().delete());
        }
        System.out.println();
        System.out.println(passed + " passed, " + failed + " failed" + (failed > 0 ? " " + failures : ""));
        System.exit(failed == 0 ? 0 : 1);
    }
}
