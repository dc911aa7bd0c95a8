//! Minimal validating JSON parser (RFC 8259), std only.

#[derive(Debug, Clone)]
#[allow(dead_code)]
pub enum Value {
    Null,
    Bool(bool),
    /// Number, kept as its exact source text.
    Num(String),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

impl Value {
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Obj(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Str(_) => "string",
            Value::Arr(_) => "array",
            Value::Obj(_) => "object",
        }
    }
}

const MAX_DEPTH: usize = 512;

struct P<'a> {
    b: &'a [u8],
    i: usize,
}

pub type PResult<T> = Result<T, String>;

impl<'a> P<'a> {
    fn err<T>(&self, what: &str) -> PResult<T> {
        Err(format!("{} at byte {}", what, self.i))
    }
    fn ws(&mut self) {
        while self.i < self.b.len() {
            match self.b[self.i] {
                b' ' | b'\t' | b'\n' | b'\r' => self.i += 1,
                _ => break,
            }
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn lit(&mut self, s: &[u8]) -> PResult<()> {
        if self.b.len() >= self.i + s.len() && &self.b[self.i..self.i + s.len()] == s {
            self.i += s.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }
    /// Parse a value. When `build` is false, containers are validated but
    /// returned empty (only the type is meaningful).
    fn value(&mut self, depth: usize, build: bool) -> PResult<Value> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        self.ws();
        match self.peek() {
            None => self.err("unexpected end of input"),
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Value::Obj(members));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return self.err("expected string key");
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return self.err("expected ':'");
                    }
                    self.i += 1;
                    let v = self.value(depth + 1, build)?;
                    if build {
                        members.push((k, v));
                    }
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Obj(members));
                        }
                        _ => return self.err("expected ',' or '}'"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Value::Arr(items));
                }
                loop {
                    let v = self.value(depth + 1, build)?;
                    if build {
                        items.push(v);
                    }
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Arr(items));
                        }
                        _ => return self.err("expected ',' or ']'"),
                    }
                }
            }
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b't') => self.lit(b"true").map(|_| Value::Bool(true)),
            Some(b'f') => self.lit(b"false").map(|_| Value::Bool(false)),
            Some(b'n') => self.lit(b"null").map(|_| Value::Null),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(_) => self.err("unexpected character"),
        }
    }
    fn digits(&mut self) -> usize {
        let s = self.i;
        while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.i - s
    }
    fn number(&mut self) -> PResult<Value> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(c) if c.is_ascii_digit() => {
                self.digits();
            }
            _ => return self.err("invalid number"),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return self.err("invalid number fraction");
            }
        }
        if matches!(self.peek(), Some(b'e') | Some(b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+') | Some(b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return self.err("invalid number exponent");
            }
        }
        // input was validated as UTF-8 and this range is ASCII
        Ok(Value::Num(String::from_utf8_lossy(&self.b[start..self.i]).into_owned()))
    }
    fn hex4(&mut self) -> PResult<u32> {
        if self.i + 4 > self.b.len() {
            return self.err("truncated \\u escape");
        }
        let mut v = 0u32;
        for k in 0..4 {
            let c = self.b[self.i + k];
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return self.err("invalid \\u escape"),
            };
            v = v * 16 + d as u32;
        }
        self.i += 4;
        Ok(v)
    }
    fn string(&mut self) -> PResult<String> {
        // at opening quote
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = match self.peek() {
                None => return self.err("unterminated string"),
                Some(c) => c,
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return match String::from_utf8(out) {
                        Ok(s) => Ok(s),
                        Err(_) => self.err("invalid UTF-8 in string"),
                    };
                }
                b'\\' => {
                    self.i += 1;
                    let e = match self.peek() {
                        None => return self.err("unterminated escape"),
                        Some(e) => e,
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) {
                                // try to combine with a following low surrogate
                                if self.b.get(self.i) == Some(&b'\\') && self.b.get(self.i + 1) == Some(&b'u') {
                                    let save = self.i;
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                    } else {
                                        self.i = save;
                                        cp = 0xFFFD;
                                    }
                                } else {
                                    cp = 0xFFFD;
                                }
                            } else if (0xDC00..0xE000).contains(&cp) {
                                cp = 0xFFFD;
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut tmp = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                c if c < 0x20 => return self.err("control character in string"),
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }
}

/// Parse a complete JSON document (full tree).
pub fn parse(text: &[u8]) -> PResult<Value> {
    if std::str::from_utf8(text).is_err() {
        return Err("invalid UTF-8".into());
    }
    let mut p = P { b: text, i: 0 };
    let v = p.value(0, true)?;
    p.ws();
    if p.i != p.b.len() {
        return p.err("trailing characters after JSON value");
    }
    Ok(v)
}

/// Top-level facts about one message, for routing.
#[derive(Debug, Default)]
pub struct Top {
    pub is_object: bool,
    pub id: Option<Value>,
    pub session_id: Option<Value>,
    pub method: Option<Value>,
    pub has_result: bool,
    pub has_error: bool,
}

/// Validate one message and extract its top-level routing fields.
pub fn scan_message(text: &[u8]) -> PResult<Top> {
    if std::str::from_utf8(text).is_err() {
        return Err("invalid UTF-8".into());
    }
    let mut p = P { b: text, i: 0 };
    let mut top = Top::default();
    p.ws();
    if p.peek() == Some(b'{') {
        top.is_object = true;
        p.i += 1;
        p.ws();
        if p.peek() == Some(b'}') {
            p.i += 1;
        } else {
            loop {
                p.ws();
                if p.peek() != Some(b'"') {
                    return p.err("expected string key");
                }
                let k = p.string()?;
                p.ws();
                if p.peek() != Some(b':') {
                    return p.err("expected ':'");
                }
                p.i += 1;
                let want = matches!(k.as_str(), "id" | "sessionId" | "method");
                let v = p.value(1, want)?;
                match k.as_str() {
                    "id" => top.id = Some(v),
                    "sessionId" => top.session_id = Some(v),
                    "method" => top.method = Some(v),
                    "result" => top.has_result = true,
                    "error" => top.has_error = true,
                    _ => {}
                }
                p.ws();
                match p.peek() {
                    Some(b',') => p.i += 1,
                    Some(b'}') => {
                        p.i += 1;
                        break;
                    }
                    _ => return p.err("expected ',' or '}'"),
                }
            }
        }
    } else {
        p.value(0, false)?;
    }
    p.ws();
    if p.i != p.b.len() {
        return p.err("trailing characters after JSON value");
    }
    Ok(top)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn basics() {
        assert!(parse(b"{\"a\":[1,2.5e3,-0,true,false,null,\"x\\u00e9\\ud83d\\ude00\"]}").is_ok());
        assert!(parse(b"{\"a\":01}").is_err());
        assert!(parse(b"{\"a\":1,}").is_err());
        assert!(parse(b"{} x").is_err());
        assert!(parse(b"\"a\tb\"").is_err());
        let t = scan_message(b" {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"m\",\"params\":{\"id\":9},\"sessionId\":\"s\"}\r").unwrap();
        assert!(t.is_object);
        assert!(matches!(t.id, Some(Value::Num(ref n)) if n == "7"));
        assert!(matches!(t.session_id, Some(Value::Str(ref s)) if s == "s"));
        let t = scan_message(b"[1,2]").unwrap();
        assert!(!t.is_object);
        assert!(scan_message(b"{\"id\":1").is_err());
    }
}
