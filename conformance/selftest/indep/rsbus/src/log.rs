use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, PartialEq, PartialOrd)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

static THRESHOLD: AtomicU8 = AtomicU8::new(1);

pub fn set_level(l: Level) {
    THRESHOLD.store(l as u8, Ordering::SeqCst);
}

pub fn enabled(l: Level) -> bool {
    (l as u8) >= THRESHOLD.load(Ordering::Relaxed)
}

fn civil(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days_from_civil inverse
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = (z - era * 146097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe as i64 + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn log(l: Level, msg: &str) {
    if !enabled(l) {
        return;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (y, mo, d) = civil(secs.div_euclid(86400));
    let sod = secs.rem_euclid(86400);
    let name = match l {
        Level::Debug => "DEBUG",
        Level::Info => "INFO",
        Level::Warn => "WARN",
        Level::Error => "ERROR",
    };
    let line = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z [{}] {}\n",
        y,
        mo,
        d,
        sod / 3600,
        (sod / 60) % 60,
        sod % 60,
        now.subsec_millis(),
        name,
        msg
    );
    // stderr may share a (non-blocking) file description with stdout: retry briefly.
    let mut buf = line.as_bytes();
    let mut tries = 0;
    while !buf.is_empty() {
        match crate::sys::sys_write(2, buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e == crate::sys::EAGAIN && tries < 50 => {
                tries += 1;
                let mut p = [crate::sys::PollFd { fd: 2, events: crate::sys::POLLOUT, revents: 0 }];
                crate::sys::sys_poll(&mut p, 20);
            }
            Err(_) => break,
        }
    }
}

#[macro_export]
macro_rules! debug { ($($a:tt)*) => { if $crate::log::enabled($crate::log::Level::Debug) { $crate::log::log($crate::log::Level::Debug, &format!($($a)*)) } } }
#[macro_export]
macro_rules! info { ($($a:tt)*) => { $crate::log::log($crate::log::Level::Info, &format!($($a)*)) } }
#[macro_export]
macro_rules! warn { ($($a:tt)*) => { $crate::log::log($crate::log::Level::Warn, &format!($($a)*)) } }
#[macro_export]
macro_rules! error { ($($a:tt)*) => { $crate::log::log($crate::log::Level::Error, &format!($($a)*)) } }
