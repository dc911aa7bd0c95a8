use crate::json::{self, Value};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Pool {
    pub id: String,
    pub command: String,
    pub args: Vec<String>,
    pub instances: usize,
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_input_buffer: usize,
    pub max_output_queue: usize,
    pub max_restarts: usize,
    pub restart_window: Duration,
    pub drain_timeout: Duration,
    pub backpressure_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_input_buffer: 1_048_576,
            max_output_queue: 4_194_304,
            max_restarts: 5,
            restart_window: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(30),
            backpressure_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub pools: Vec<Pool>,
    pub limits: Limits,
}

fn num_f64(v: &Value, name: &str) -> Result<f64, String> {
    match v {
        Value::Num(s) => s.parse::<f64>().map_err(|_| format!("{}: invalid number", name)),
        other => Err(format!("{} must be a number, got {}", name, other.type_name())),
    }
}

fn nonneg_int(v: &Value, name: &str) -> Result<u64, String> {
    let f = num_f64(v, name)?;
    if f < 0.0 || f.fract() != 0.0 || !f.is_finite() || f > 9.0e15 {
        return Err(format!("{} must be a non-negative integer", name));
    }
    Ok(f as u64)
}

fn seconds(v: &Value, name: &str) -> Result<Duration, String> {
    let f = num_f64(v, name)?;
    if f < 0.0 || !f.is_finite() || f > 1.0e9 {
        return Err(format!("{} must be a non-negative number of seconds", name));
    }
    Ok(Duration::from_secs_f64(f))
}

fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(p) {
        Ok(m) => m.is_file() && (m.permissions().mode() & 0o111) != 0,
        Err(_) => false,
    }
}

pub fn command_valid(cmd: &str) -> bool {
    if cmd.contains('/') {
        return is_executable(std::path::Path::new(cmd));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).any(|d| is_executable(&d.join(cmd)))
}

pub fn load(path: &str) -> Result<Config, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read config file '{}': {}", path, e))?;
    let v = json::parse(&text).map_err(|e| format!("config file '{}' is not valid JSON: {}", path, e))?;
    parse_config(&v)
}

pub fn parse_config(v: &Value) -> Result<Config, String> {
    if !matches!(v, Value::Obj(_)) {
        return Err("config must be a JSON object".into());
    }
    let pools_v = match v.get("pools") {
        Some(Value::Arr(a)) => a,
        Some(other) => return Err(format!("'pools' must be an array, got {}", other.type_name())),
        None => return Err("'pools' is required".into()),
    };
    if pools_v.is_empty() {
        return Err("'pools' must contain at least one pool".into());
    }
    let mut pools: Vec<Pool> = Vec::new();
    for (i, p) in pools_v.iter().enumerate() {
        if !matches!(p, Value::Obj(_)) {
            return Err(format!("pools[{}] must be an object", i));
        }
        let id = match p.get("id") {
            Some(Value::Str(s)) if !s.is_empty() => s.clone(),
            Some(Value::Str(_)) => return Err(format!("pools[{}].id must not be empty", i)),
            Some(o) => return Err(format!("pools[{}].id must be a string, got {}", i, o.type_name())),
            None => return Err(format!("pools[{}].id is required", i)),
        };
        if pools.iter().any(|q| q.id == id) {
            return Err(format!("duplicate pool id '{}'", id));
        }
        let command = match p.get("command") {
            Some(Value::Str(s)) if !s.is_empty() => s.clone(),
            Some(Value::Str(_)) => return Err(format!("pool '{}': command must not be empty", id)),
            Some(o) => return Err(format!("pool '{}': command must be a string, got {}", id, o.type_name())),
            None => return Err(format!("pool '{}': command is required", id)),
        };
        let mut args = Vec::new();
        match p.get("args") {
            None | Some(Value::Null) => {}
            Some(Value::Arr(a)) => {
                for (j, x) in a.iter().enumerate() {
                    match x {
                        Value::Str(s) => args.push(s.clone()),
                        o => return Err(format!("pool '{}': args[{}] must be a string, got {}", id, j, o.type_name())),
                    }
                }
            }
            Some(o) => return Err(format!("pool '{}': args must be an array, got {}", id, o.type_name())),
        }
        let instances = match p.get("instances") {
            Some(x) => nonneg_int(x, &format!("pool '{}': instances", id))?,
            None => return Err(format!("pool '{}': instances is required", id)),
        };
        if instances < 1 {
            return Err(format!("pool '{}': instances must be >= 1", id));
        }
        if instances > 1000 {
            return Err(format!("pool '{}': instances must be <= 1000", id));
        }
        if !command_valid(&command) {
            return Err(format!("pool '{}': command '{}' not found or not executable", id, command));
        }
        pools.push(Pool { id, command, args, instances: instances as usize });
    }
    let mut limits = Limits::default();
    match v.get("limits") {
        None | Some(Value::Null) => {}
        Some(l @ Value::Obj(_)) => {
            if let Some(x) = l.get("max_input_buffer") {
                let n = nonneg_int(x, "limits.max_input_buffer")?;
                if n < 1 {
                    return Err("limits.max_input_buffer must be >= 1".into());
                }
                limits.max_input_buffer = n as usize;
            }
            if let Some(x) = l.get("max_output_queue") {
                let n = nonneg_int(x, "limits.max_output_queue")?;
                if n < 1 {
                    return Err("limits.max_output_queue must be >= 1".into());
                }
                limits.max_output_queue = n as usize;
            }
            if let Some(x) = l.get("max_restarts") {
                limits.max_restarts = nonneg_int(x, "limits.max_restarts")? as usize;
            }
            if let Some(x) = l.get("restart_window_sec") {
                limits.restart_window = seconds(x, "limits.restart_window_sec")?;
            }
            if let Some(x) = l.get("drain_timeout_sec") {
                limits.drain_timeout = seconds(x, "limits.drain_timeout_sec")?;
            }
            if let Some(x) = l.get("backpressure_timeout_sec") {
                limits.backpressure_timeout = seconds(x, "limits.backpressure_timeout_sec")?;
            }
        }
        Some(o) => return Err(format!("'limits' must be an object, got {}", o.type_name())),
    }
    Ok(Config { pools, limits })
}
