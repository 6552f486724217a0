//! Go's `fmt.Sprintf` for template values: flags `-+# 0`, width, precision and the verbs
//! `v s d f F e E g G x X o b t q c U %`. A verb that does not fit its operand prints as Go
//! does, `%!d(string=x)`.

use super::exec::print;
use super::{format_float, Value};

struct Spec {
    minus: bool,
    plus: bool,
    zero: bool,
    space: bool,
    sharp: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut next = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec {
            minus: false,
            plus: false,
            zero: false,
            space: false,
            sharp: false,
            width: None,
            precision: None,
        };
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '0' => spec.zero = true,
                ' ' => spec.space = true,
                '#' => spec.sharp = true,
                _ => break,
            }
            chars.next();
        }
        let digits = |chars: &mut std::iter::Peekable<std::str::Chars>| {
            let mut n: Option<usize> = None;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                n = Some(n.unwrap_or(0) * 10 + d as usize);
                chars.next();
            }
            n
        };
        spec.width = digits(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(digits(&mut chars).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(next) else {
            out.push_str(&format!("%!{verb}(MISSING)"));
            continue;
        };
        next += 1;
        let body = match one(verb, &spec, arg) {
            Some(body) => body,
            None => {
                let mut v = String::new();
                print(arg, &mut v);
                out.push_str(&format!("%!{verb}({}={v})", arg.type_name()));
                continue;
            }
        };
        out.push_str(&pad(body, &spec, verb));
    }
    if next < args.len() {
        out.push_str("%!(EXTRA ");
        for (i, arg) in args[next..].iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let mut v = String::new();
            print(arg, &mut v);
            out.push_str(&format!("{}={v}", arg.type_name()));
        }
        out.push(')');
    }
    out
}

fn signed(s: String, spec: &Spec, negative: bool) -> String {
    if negative {
        s
    } else if spec.plus {
        format!("+{s}")
    } else if spec.space {
        format!(" {s}")
    } else {
        s
    }
}

/// The operand formatted by the verb, before padding; `None` for a bad verb.
fn one(verb: char, spec: &Spec, arg: &Value) -> Option<String> {
    match (verb, arg) {
        ('v', Value::Float(f)) | ('g', Value::Float(f)) | ('G', Value::Float(f))
            if spec.precision.is_none() =>
        {
            let s = format_float(*f);
            Some(signed(
                if verb == 'G' { s.to_uppercase() } else { s },
                spec,
                *f < 0.0,
            ))
        }
        ('v', Value::Int(n)) | ('d', Value::Int(n)) => Some(signed(n.to_string(), spec, *n < 0)),
        ('v', Value::Str(s)) | ('s', Value::Str(s)) => Some(match spec.precision {
            Some(p) => s.chars().take(p).collect(),
            None => s.clone(),
        }),
        ('v', other) | ('s', other) => {
            let mut s = String::new();
            print(other, &mut s);
            Some(s)
        }
        ('t', Value::Bool(b)) => Some(b.to_string()),
        ('q', Value::Str(s)) => Some(serde_json::to_string(s).unwrap_or_default()),
        ('q', Value::Int(n)) => char::from_u32(*n as u32).map(|c| format!("{c:?}")),
        ('c', Value::Int(n)) => char::from_u32(*n as u32).map(String::from),
        ('U', Value::Int(n)) => Some(format!("U+{n:04X}")),
        ('x', Value::Int(n)) => Some(with_prefix(
            format!("{:x}", n.unsigned_abs()),
            *n,
            spec,
            "0x",
        )),
        ('X', Value::Int(n)) => Some(with_prefix(
            format!("{:X}", n.unsigned_abs()),
            *n,
            spec,
            "0X",
        )),
        ('o', Value::Int(n)) => Some(with_prefix(
            format!("{:o}", n.unsigned_abs()),
            *n,
            spec,
            "0",
        )),
        ('b', Value::Int(n)) => Some(with_prefix(format!("{:b}", n.unsigned_abs()), *n, spec, "")),
        ('x', Value::Str(s)) => Some(s.bytes().map(|b| format!("{b:02x}")).collect()),
        ('X', Value::Str(s)) => Some(s.bytes().map(|b| format!("{b:02X}")).collect()),
        ('f' | 'F' | 'e' | 'E' | 'g' | 'G', Value::Float(f)) => {
            let f = *f;
            let p = spec.precision.unwrap_or(6);
            let s = match verb {
                'f' | 'F' => format!("{:.*}", p, f.abs()),
                'e' | 'E' => exponent(f.abs(), p, verb == 'E'),
                _ => {
                    let p = p.max(1);
                    let exp = if f == 0.0 {
                        0
                    } else {
                        f.abs().log10().floor() as i64
                    };
                    if exp < -4 || exp >= p as i64 {
                        trim_exponent(exponent(f.abs(), p - 1, verb == 'G'))
                    } else {
                        let s = format!("{:.*}", (p as i64 - 1 - exp).max(0) as usize, f.abs());
                        if s.contains('.') {
                            s.trim_end_matches('0').trim_end_matches('.').to_string()
                        } else {
                            s
                        }
                    }
                }
            };
            let s = if f < 0.0 { format!("-{s}") } else { s };
            Some(signed(s, spec, f < 0.0))
        }
        _ => None,
    }
}

fn with_prefix(digits: String, n: i64, spec: &Spec, prefix: &str) -> String {
    let body = if spec.sharp {
        format!("{prefix}{digits}")
    } else {
        digits
    };
    signed(if n < 0 { format!("-{body}") } else { body }, spec, n < 0)
}

/// `d.ddddde±dd` with `precision` decimals.
fn exponent(f: f64, precision: usize, upper: bool) -> String {
    let s = format!("{:.*e}", precision, f);
    let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    let out = format!("{mantissa}e{sign}{:02}", e.abs());
    if upper {
        out.to_uppercase()
    } else {
        out
    }
}

fn trim_exponent(s: String) -> String {
    let Some((mantissa, e)) = s.split_once(['e', 'E']) else {
        return s;
    };
    let marker = if s.contains('E') { 'E' } else { 'e' };
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    format!("{mantissa}{marker}{e}")
}

fn pad(body: String, spec: &Spec, verb: char) -> String {
    let Some(width) = spec.width else {
        return body;
    };
    let len = body.chars().count();
    if len >= width {
        return body;
    }
    let fill = width - len;
    if spec.minus {
        return format!("{body}{}", " ".repeat(fill));
    }
    let numeric = matches!(
        verb,
        'd' | 'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'x' | 'X' | 'o' | 'b' | 'v'
    );
    if spec.zero && numeric {
        let (sign, digits) = match body.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), body[1..].to_string()),
            _ => (String::new(), body),
        };
        if digits.chars().all(|c| {
            c.is_ascii_hexdigit()
                || c == '.'
                || c == 'e'
                || c == 'E'
                || c == '+'
                || c == '-'
                || c == 'x'
                || c == 'X'
        }) {
            return format!("{sign}{}{digits}", "0".repeat(fill));
        }
        return format!("{}{sign}{digits}", " ".repeat(fill));
    }
    format!("{}{body}", " ".repeat(fill))
}
