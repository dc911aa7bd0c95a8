package javabus;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/** Line-oriented logger writing to stderr only (Appendix C). Thread-safe. */
final class Log {
    static final int DEBUG = 0, INFO = 1, WARN = 2, ERROR = 3;
    private static final String[] NAMES = {"DEBUG", "INFO", "WARN", "ERROR"};
    private static final DateTimeFormatter TS =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);
    private static final OutputStream ERR = new FileOutputStream(FileDescriptor.err);
    static volatile int level = INFO;

    private Log() {}

    static int parseLevel(String s) {
        if (s == null) return -1;
        switch (s.toLowerCase()) {
            case "debug": return DEBUG;
            case "info": return INFO;
            case "warn": case "warning": return WARN;
            case "error": return ERROR;
            default: return -1;
        }
    }

    static boolean on(int lvl) { return lvl >= level; }

    static void log(int lvl, String msg) {
        if (lvl < level) return;
        String line = TS.format(Instant.now()) + " " + NAMES[lvl] + " javabus: " + msg + "\n";
        byte[] bytes = line.getBytes(StandardCharsets.UTF_8);
        synchronized (ERR) {
            try { ERR.write(bytes); ERR.flush(); } catch (IOException ignored) { }
        }
    }

    static void debug(String m) { log(DEBUG, m); }
    static void info(String m) { log(INFO, m); }
    static void warn(String m) { log(WARN, m); }
    static void error(String m) { log(ERROR, m); }

    /** Raw line to stderr (usage text), not a log line. */
    static void raw(String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        synchronized (ERR) {
            try { ERR.write(bytes); ERR.flush(); } catch (IOException ignored) { }
        }
    }
}
