//! rsbus — an independent implementation of the stdio Bus v0.1.0 daemon.

#[macro_use]
mod log;
mod bus;
mod config;
mod json;
mod sys;

use bus::{Bus, Listener};

const USAGE: &str = concat!(
    "usage: rsbus --config <path> [--stdio | --unix <path> | --tcp <host:port>] [--log-level debug|info|warn|error]\n",
    "  --config <path>     JSON configuration file (required)\n",
    "  --stdio             single client on stdin/stdout (default)\n",
    "  --unix <path>       accept clients on a Unix domain socket\n",
    "  --tcp <host:port>   accept clients on a TCP socket\n",
    "  --log-level <lvl>   stderr log threshold (default info)\n",
);

#[derive(PartialEq, Clone, Debug)]
enum Mode {
    Stdio,
    Unix(String),
    Tcp(String),
}

fn usage_error(msg: &str) -> ! {
    error!("{}", msg);
    let _ = std::io::Write::write_all(&mut std::io::stderr(), USAGE.as_bytes());
    std::process::exit(1);
}

fn parse_args() -> (String, Mode) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config: Option<String> = None;
    let mut mode: Option<Mode> = None;
    let mut i = 0;
    let set_mode = |m: Mode, mode: &mut Option<Mode>| {
        if let Some(old) = mode.as_ref() {
            if std::mem::discriminant(old) != std::mem::discriminant(&m) {
                usage_error("only one of --stdio, --unix, --tcp may be given");
            }
        }
        *mode = Some(m);
    };
    while i < args.len() {
        let a = args[i].clone();
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let value = |i: &mut usize| -> String {
            if let Some(v) = inline.clone() {
                return v;
            }
            *i += 1;
            match args.get(*i) {
                Some(v) => v.clone(),
                None => usage_error(&format!("option {} requires a value", name)),
            }
        };
        match name.as_str() {
            "--config" => config = Some(value(&mut i)),
            "--stdio" => {
                if inline.is_some() {
                    usage_error("--stdio takes no value");
                }
                set_mode(Mode::Stdio, &mut mode)
            }
            "--unix" => {
                let v = value(&mut i);
                set_mode(Mode::Unix(v), &mut mode)
            }
            "--tcp" => {
                let v = value(&mut i);
                set_mode(Mode::Tcp(v), &mut mode)
            }
            "--log-level" => {
                let v = value(&mut i);
                let l = match v.to_ascii_lowercase().as_str() {
                    "debug" => log::Level::Debug,
                    "info" => log::Level::Info,
                    "warn" | "warning" => log::Level::Warn,
                    "error" => log::Level::Error,
                    _ => usage_error(&format!("unknown log level '{}'", v)),
                };
                log::set_level(l);
            }
            "--help" | "-h" => {
                print!("{}", USAGE);
                std::process::exit(0);
            }
            "--version" => {
                println!("rsbus 0.1.0 (stdio Bus specification v0.1.0)");
                std::process::exit(0);
            }
            _ => usage_error(&format!("unknown argument '{}'", a)),
        }
        i += 1;
    }
    let config = match config {
        Some(c) => c,
        None => usage_error("--config <path> is required"),
    };
    (config, mode.unwrap_or(Mode::Stdio))
}

fn bind_unix(path: &str) -> Result<std::os::unix::net::UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    if path.is_empty() {
        return Err("empty unix socket path".into());
    }
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            return Err(format!("'{}' exists and is not a socket", path));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!("'{}' is in use by another process", path));
        }
        std::fs::remove_file(path).map_err(|e| format!("cannot remove stale socket '{}': {}", path, e))?;
        info!("removed stale socket {}", path);
    }
    let l = std::os::unix::net::UnixListener::bind(path).map_err(|e| format!("cannot bind unix socket '{}': {}", path, e))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(l)
}

fn bind_tcp(spec: &str) -> Result<std::net::TcpListener, String> {
    use std::net::ToSocketAddrs;
    let (host, port) = spec.rsplit_once(':').ok_or_else(|| format!("invalid --tcp address '{}' (expected host:port)", spec))?;
    let port: u16 = port.parse().map_err(|_| format!("invalid port in '{}'", spec))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    let addrs: Vec<std::net::SocketAddr> = (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve '{}': {}", host, e))?.collect();
    let mut last = format!("no address for '{}'", spec);
    for a in addrs {
        match std::net::TcpListener::bind(a) {
            Ok(l) => {
                l.set_nonblocking(true).map_err(|e| e.to_string())?;
                return Ok(l);
            }
            Err(e) => last = format!("cannot bind {}: {}", a, e),
        }
    }
    Err(last)
}

fn main() {
    let (config_path, mode) = parse_args();
    let cfg = match config::load(&config_path) {
        Ok(c) => c,
        Err(e) => {
            error!("configuration error: {}", e);
            std::process::exit(1);
        }
    };
    let sigfd = match sys::install_signals() {
        Ok(fd) => fd,
        Err(e) => {
            error!("{}", e);
            std::process::exit(1);
        }
    };
    let (listener, stdio) = match &mode {
        Mode::Stdio => (Listener::None, true),
        Mode::Unix(p) => match bind_unix(p) {
            Ok(l) => {
                info!("listening on unix socket {}", p);
                (Listener::Unix(l, p.clone()), false)
            }
            Err(e) => {
                error!("{}", e);
                std::process::exit(1);
            }
        },
        Mode::Tcp(spec) => match bind_tcp(spec) {
            Ok(l) => {
                match l.local_addr() {
                    Ok(a) => info!("listening on tcp {}", a),
                    Err(_) => info!("listening on tcp {}", spec),
                }
                (Listener::Tcp(l), false)
            }
            Err(e) => {
                error!("{}", e);
                std::process::exit(1);
            }
        },
    };
    let total: usize = cfg.pools.iter().map(|p| p.instances).sum();
    info!(
        "stdio Bus daemon starting: mode={}, config={}, {} pool(s), {} worker(s)",
        match &mode {
            Mode::Stdio => "stdio".to_string(),
            Mode::Unix(p) => format!("unix:{}", p),
            Mode::Tcp(t) => format!("tcp:{}", t),
        },
        config_path,
        cfg.pools.len(),
        total
    );
    let mut bus = Bus::new(cfg, listener, stdio, sigfd);
    let code = bus.run();
    std::process::exit(code);
}
