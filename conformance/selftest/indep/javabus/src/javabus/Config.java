package javabus;

import java.io.File;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** Configuration (section 9) with validation (9.3) and defaults (8.1). */
final class Config {
    static final class ConfigException extends Exception {
        ConfigException(String m) { super(m); }
    }

    static final class Pool {
        String id;
        String command;
        List<String> args = new ArrayList<>();
        int instances;
    }

    /** 8.2 hard-coded limits. */
    static final int MAX_CONNECTIONS = 1024;
    static final int MAX_SESSIONS = 1024;
    static final int MAX_PENDING_REQUESTS = 4096;

    final List<Pool> pools = new ArrayList<>();
    long maxInputBuffer = 1_048_576;
    long maxOutputQueue = 4_194_304;
    int maxRestarts = 5;
    double restartWindowSec = 60;
    double drainTimeoutSec = 30;
    double backpressureTimeoutSec = 60;

    int totalInstances() {
        int n = 0;
        for (Pool p : pools) n += p.instances;
        return n;
    }

    static Config load(String path) throws ConfigException {
        byte[] data;
        try {
            data = Files.readAllBytes(Paths.get(path));
        } catch (IOException e) {
            throw new ConfigException("cannot read config file " + path + ": " + e);
        }
        Object root;
        try {
            root = Json.parseTree(data);
        } catch (Json.ParseException e) {
            throw new ConfigException("config file " + path + " is not valid JSON: " + e.getMessage());
        }
        return fromTree(root);
    }

    @SuppressWarnings("unchecked")
    static Config fromTree(Object root) throws ConfigException {
        if (!(root instanceof Map)) throw new ConfigException("config: top level must be a JSON object");
        Map<String, Object> top = (Map<String, Object>) root;
        Config c = new Config();
        for (String k : top.keySet())
            if (!k.equals("pools") && !k.equals("limits")) Log.warn("config: ignoring unknown key \"" + k + "\"");
        Object pools = top.get("pools");
        if (pools == null) throw new ConfigException("config: \"pools\" is required");
        if (!(pools instanceof List)) throw new ConfigException("config: \"pools\" must be an array");
        List<Object> pl = (List<Object>) pools;
        if (pl.isEmpty()) throw new ConfigException("config: \"pools\" must contain at least one pool");
        Set<String> ids = new HashSet<>();
        int idx = 0;
        for (Object o : pl) {
            String where = "config: pools[" + idx + "]";
            if (!(o instanceof Map)) throw new ConfigException(where + " must be an object");
            Map<String, Object> pm = (Map<String, Object>) o;
            for (String k : pm.keySet())
                if (!k.equals("id") && !k.equals("command") && !k.equals("args") && !k.equals("instances"))
                    Log.warn(where + ": ignoring unknown key \"" + k + "\"");
            Pool p = new Pool();
            Object id = pm.get("id");
            if (!(id instanceof String) || ((String) id).isEmpty())
                throw new ConfigException(where + ".id must be a non-empty string");
            p.id = (String) id;
            if (!ids.add(p.id)) throw new ConfigException(where + ".id \"" + p.id + "\" is not unique");
            Object cmd = pm.get("command");
            if (!(cmd instanceof String) || ((String) cmd).isEmpty())
                throw new ConfigException(where + ".command must be a non-empty string");
            p.command = (String) cmd;
            if (resolveCommand(p.command) == null)
                throw new ConfigException(where + ".command \"" + p.command + "\" is not an executable file");
            if (pm.containsKey("args")) {
                Object a = pm.get("args");
                if (!(a instanceof List)) throw new ConfigException(where + ".args must be an array of strings");
                for (Object s : (List<Object>) a) {
                    if (!(s instanceof String)) throw new ConfigException(where + ".args must be an array of strings");
                    p.args.add((String) s);
                }
            }
            Object inst = pm.get("instances");
            if (inst == null) throw new ConfigException(where + ".instances is required");
            BigDecimal n = integral(inst);
            if (n == null || n.compareTo(BigDecimal.ONE) < 0 || n.compareTo(BigDecimal.valueOf(100000)) > 0)
                throw new ConfigException(where + ".instances must be an integer >= 1");
            p.instances = n.intValueExact();
            c.pools.add(p);
            idx++;
        }
        int maxWorkers = (MAX_CONNECTIONS - 1) / 2;
        if (c.totalInstances() > maxWorkers)
            throw new ConfigException("config: total instances " + c.totalInstances()
                    + " exceeds " + maxWorkers + " (MAX_CONNECTIONS=" + MAX_CONNECTIONS + ")");
        if (top.containsKey("limits")) {
            Object lo = top.get("limits");
            if (!(lo instanceof Map)) throw new ConfigException("config: \"limits\" must be an object");
            Map<String, Object> lm = (Map<String, Object>) lo;
            for (Map.Entry<String, Object> e : lm.entrySet()) {
                String k = e.getKey();
                Object v = e.getValue();
                String where = "config: limits." + k;
                switch (k) {
                    case "max_input_buffer":
                        c.maxInputBuffer = intAtLeast(v, 1, where); break;
                    case "max_output_queue":
                        c.maxOutputQueue = intAtLeast(v, 1, where); break;
                    case "max_restarts":
                        c.maxRestarts = (int) Math.min(Integer.MAX_VALUE, intAtLeast(v, 0, where)); break;
                    case "restart_window_sec":
                        c.restartWindowSec = secs(v, where); break;
                    case "drain_timeout_sec":
                        c.drainTimeoutSec = secs(v, where); break;
                    case "backpressure_timeout_sec":
                        c.backpressureTimeoutSec = secs(v, where); break;
                    default:
                        Log.warn("config: ignoring unknown key \"limits." + k + "\"");
                }
            }
        }
        return c;
    }

    private static BigDecimal integral(Object v) {
        if (!(v instanceof BigDecimal)) return null;
        BigDecimal d = (BigDecimal) v;
        try {
            return new BigDecimal(d.toBigIntegerExact());
        } catch (ArithmeticException e) {
            return null;
        }
    }

    private static long intAtLeast(Object v, long min, String where) throws ConfigException {
        BigDecimal n = integral(v);
        if (n == null || n.compareTo(BigDecimal.valueOf(min)) < 0)
            throw new ConfigException(where + " must be an integer >= " + min);
        if (n.compareTo(BigDecimal.valueOf(Long.MAX_VALUE / 4)) > 0) return Long.MAX_VALUE / 4;
        return n.longValue();
    }

    private static double secs(Object v, String where) throws ConfigException {
        if (!(v instanceof BigDecimal) || ((BigDecimal) v).signum() < 0)
            throw new ConfigException(where + " must be a number >= 0");
        double d = ((BigDecimal) v).doubleValue();
        if (Double.isInfinite(d) || d > 1e9) d = 1e9;
        return d;
    }

    /** 9.3 "valid command path": returns the resolved executable or null. */
    static String resolveCommand(String cmd) {
        if (cmd.indexOf('/') >= 0) {
            Path p = Paths.get(cmd);
            return (Files.isRegularFile(p) && Files.isExecutable(p)) ? cmd : null;
        }
        String path = System.getenv("PATH");
        if (path == null) path = "/usr/local/bin:/usr/bin:/bin";
        for (String dir : path.split(File.pathSeparator)) {
            if (dir.isEmpty()) dir = ".";
            Path p = Paths.get(dir, cmd);
            if (Files.isRegularFile(p) && Files.isExecutable(p)) return p.toString();
        }
        return null;
    }
}
