package javabus;

import java.io.PrintStream;

/** Entry point: javabus --config <path> [--stdio | --unix <path> | --tcp <host:port>] */
public final class Main {
    static final String VERSION = "javabus 0.1.0 (stdio Bus v0.1.0)";
    static final String USAGE =
            "usage: javabus --config <path> [--stdio | --unix <path> | --tcp <host:port>]\n"
          + "               [--log-level debug|info|warn|error]\n"
          + "  --config <path>      JSON configuration file (required)\n"
          + "  --stdio              single client on stdin/stdout (default)\n"
          + "  --unix <path>        accept clients on a Unix domain socket\n"
          + "  --tcp <host:port>    accept clients on a TCP socket (port 0 = ephemeral)\n"
          + "  --log-level <level>  stderr log threshold (default info; env JAVABUS_LOG_LEVEL)\n"
          + "  --help, --version\n";

    private Main() {}

    private static int usage(String err) {
        Log.raw("javabus: " + err + "\n" + USAGE);
        return 2;
    }

    public static void main(String[] argv) {
        // Nothing but forwarded messages may reach stdout (READINGS A5).
        PrintStream err = System.err;
        System.setOut(err);
        int code;
        try {
            code = realMain(argv);
        } catch (Throwable t) {
            Log.error("fatal: " + t);
            code = 70;
        }
        System.exit(code);
    }

    static int realMain(String[] argv) {
        String config = null, level = null, mode = null, addr = null;
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            String val = null;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) { val = a.substring(eq + 1); a = a.substring(0, eq); }
            switch (a) {
                case "-h": case "--help":
                    Log.raw(USAGE);
                    return 0;
                case "--version":
                    Log.raw(VERSION + "\n");
                    return 0;
                case "--config": case "--log-level": case "--unix": case "--tcp": {
                    if (val == null) {
                        if (i + 1 >= argv.length) return usage(a + " requires an argument");
                        val = argv[++i];
                    }
                    if (a.equals("--config")) {
                        if (config != null) return usage("--config given twice");
                        config = val;
                    } else if (a.equals("--log-level")) {
                        level = val;
                    } else {
                        if (mode != null) return usage("only one of --stdio, --unix, --tcp may be given");
                        mode = a;
                        addr = val;
                    }
                    break;
                }
                case "--stdio":
                    if (val != null) return usage("--stdio takes no argument");
                    if (mode != null) return usage("only one of --stdio, --unix, --tcp may be given");
                    mode = a;
                    break;
                default:
                    return usage("unknown argument: " + argv[i]);
            }
        }
        if (level == null) level = System.getenv("JAVABUS_LOG_LEVEL");
        if (level != null && !level.isEmpty()) {
            int l = Log.parseLevel(level);
            if (l < 0) return usage("bad log level: " + level);
            Log.level = l;
        }
        if (config == null) return usage("--config <path> is required");
        Bus.Mode m = Bus.Mode.STDIO;
        if ("--unix".equals(mode)) {
            if (addr.isEmpty()) return usage("--unix requires a non-empty path");
            m = Bus.Mode.UNIX;
        } else if ("--tcp".equals(mode)) {
            int c = addr.lastIndexOf(':');
            if (c < 0) return usage("--tcp expects host:port");
            String port = addr.substring(c + 1);
            try {
                int p = Integer.parseInt(port);
                if (p < 0 || p > 65535 || !port.matches("[0-9]+")) return usage("bad TCP port: " + port);
            } catch (NumberFormatException e) {
                return usage("bad TCP port: " + port);
            }
            String host = addr.substring(0, c);
            if (host.contains(":") && !(host.startsWith("[") && host.endsWith("]")))
                return usage("IPv6 hosts must be written [addr]:port");
            m = Bus.Mode.TCP;
        }
        Config cfg;
        try {
            cfg = Config.load(config);
        } catch (Config.ConfigException e) {
            Log.error(e.getMessage());
            return 1;
        }
        return new Bus(cfg, m, addr).run();
    }
}
