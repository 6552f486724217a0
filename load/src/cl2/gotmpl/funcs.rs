//! The function table: Go's built-ins (`and`, `or`, `not`, `len`, `index`, `slice`, `print`,
//! `printf`, `println`, `eq`, `ne`, `lt`, `le`, `gt`, `ge`, `html`, `js`, `urlquery`) and
//! clusterloader2's (`DefaultParam`, `AddInt` … `YamlQuote`), with clusterloader2's argument
//! rules: numbers may come as ints, floats or numeric strings; the `…Int` forms truncate.

use std::cmp::Ordering;
use std::path::Path;

use rand::{Rng, SeedableRng};

use super::exec::{missing, print};
use super::printf::sprintf;
use super::Value;

/// What functions that read files need.
pub struct Context<'a> {
    /// The directory of the file being rendered.
    pub base_dir: &'a Path,
}

const BUILT_IN: &[&str] = &[
    "and", "or", "not", "len", "index", "slice", "print", "printf", "println", "eq", "ne", "lt",
    "le", "gt", "ge", "html", "js", "urlquery",
];

/// clusterloader2's template functions.
pub const CL2: &[&str] = &[
    "AddFloat",
    "AddInt",
    "Ceil",
    "Concat",
    "DefaultParam",
    "DivideFloat",
    "DivideInt",
    "ExpandEnv",
    "IfThenElse",
    "IncludeEmbedFile",
    "IncludeFile",
    "Loop",
    "Lowercase",
    "MaxFloat",
    "MaxInt",
    "MinFloat",
    "MinInt",
    "Mod",
    "MultiplyFloat",
    "MultiplyInt",
    "RandData",
    "RandDataWithSeed",
    "RandInt",
    "RandIntRange",
    "Seq",
    "SliceOfZeros",
    "StringSplit",
    "SubtractFloat",
    "SubtractInt",
    "YamlQuote",
];

pub fn exists(name: &str) -> bool {
    BUILT_IN.contains(&name) || CL2.contains(&name)
}

fn arity(args: &[Value], n: usize) -> Result<(), String> {
    if args.len() == n {
        Ok(())
    } else {
        Err(format!("wrong number of args: want {n} got {}", args.len()))
    }
}

fn at_least(args: &[Value], n: usize) -> Result<(), String> {
    if args.len() >= n {
        Ok(())
    } else {
        Err(format!(
            "wrong number of args: want at least {n} got {}",
            args.len()
        ))
    }
}

/// clusterloader2's `toFloat64`: numbers, and strings that parse as one.
fn number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Int(n) => Ok(*n as f64),
        Value::Float(f) => Ok(*f),
        Value::Str(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("cannot cast {s:?} to float64")),
        Value::Missing(path) => Err(missing(path)),
        other => Err(format!("cannot cast {} to float64", other.type_name())),
    }
}

fn numbers(args: &[Value]) -> Result<Vec<f64>, String> {
    args.iter().map(number).collect()
}

fn int(f: f64) -> Value {
    Value::Int(f.trunc() as i64)
}

fn string<'v>(v: &'v Value, what: &str) -> Result<&'v str, String> {
    match v {
        Value::Str(s) => Ok(s),
        Value::Missing(path) => Err(missing(path)),
        other => Err(format!(
            "incorrect argument type for {what}: got: {} want: string",
            other.type_name()
        )),
    }
}

/// `n` characters drawn from letters and digits.
fn random_data(n: usize, rng: &mut impl Rng) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    (0..n)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

/// FNV-1a: a seed from a string that is the same in every build and on every machine.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Calls function `name` (known to [`exists`]) on `args`.
pub fn call(name: &str, args: &[Value], context: &Context) -> Result<Value, String> {
    match name {
        "not" => {
            arity(args, 1)?;
            Ok(Value::Bool(!args[0].truth()))
        }
        "len" => {
            arity(args, 1)?;
            match &args[0] {
                Value::Str(s) => Ok(Value::Int(s.len() as i64)),
                Value::List(l) => Ok(Value::Int(l.len() as i64)),
                Value::Map(m) => Ok(Value::Int(m.len() as i64)),
                other => Err(format!("len of type {}", other.type_name())),
            }
        }
        "index" => {
            at_least(args, 1)?;
            let mut current = args[0].clone();
            for key in &args[1..] {
                current = index(current, key)?;
            }
            Ok(current)
        }
        "slice" => slice(args),
        "print" | "println" => {
            let mut out = String::new();
            for (i, arg) in args.iter().enumerate() {
                // Go's Sprint spaces operands when neither is a string; Sprintln always.
                let spaced = name == "println"
                    || (i > 0
                        && !matches!(arg, Value::Str(_))
                        && !matches!(args[i - 1], Value::Str(_)));
                if i > 0 && spaced {
                    out.push(' ');
                }
                print(arg, &mut out);
            }
            if name == "println" {
                out.push('\n');
            }
            Ok(Value::Str(out))
        }
        "printf" => {
            at_least(args, 1)?;
            Ok(Value::Str(sprintf(string(&args[0], "printf")?, &args[1..])))
        }
        "eq" => {
            at_least(args, 2)?;
            let mut any = false;
            for other in &args[1..] {
                any |= compare(&args[0], other)? == Some(Ordering::Equal);
            }
            Ok(Value::Bool(any))
        }
        "ne" => {
            arity(args, 2)?;
            Ok(Value::Bool(
                compare(&args[0], &args[1])? != Some(Ordering::Equal),
            ))
        }
        "lt" | "le" | "gt" | "ge" => {
            arity(args, 2)?;
            let ordering = compare(&args[0], &args[1])?
                .ok_or_else(|| "invalid type for comparison".to_string())?;
            Ok(Value::Bool(match name {
                "lt" => ordering == Ordering::Less,
                "le" => ordering != Ordering::Greater,
                "gt" => ordering == Ordering::Greater,
                _ => ordering != Ordering::Less,
            }))
        }
        "html" | "js" | "urlquery" => {
            let mut text = String::new();
            for arg in args {
                print(arg, &mut text);
            }
            Ok(Value::Str(escape(name, &text)))
        }
        _ => cl2(name, args, context),
    }
}

fn cl2(name: &str, args: &[Value], context: &Context) -> Result<Value, String> {
    match name {
        "DefaultParam" => {
            arity(args, 2)?;
            Ok(if args[0].is_nil() {
                args[1].clone()
            } else {
                args[0].clone()
            })
        }
        "AddFloat" | "AddInt" => {
            let sum = numbers(args)?.into_iter().sum::<f64>();
            Ok(if name == "AddInt" {
                int(sum)
            } else {
                Value::Float(sum)
            })
        }
        "MultiplyFloat" | "MultiplyInt" => {
            let product = numbers(args)?.into_iter().product::<f64>();
            Ok(if name == "MultiplyInt" {
                int(product)
            } else {
                Value::Float(product)
            })
        }
        "SubtractFloat" | "SubtractInt" => {
            arity(args, 2)?;
            let d = number(&args[0])? - number(&args[1])?;
            Ok(if name == "SubtractInt" {
                int(d)
            } else {
                Value::Float(d)
            })
        }
        "DivideFloat" | "DivideInt" => {
            arity(args, 2)?;
            let (a, b) = (number(&args[0])?, number(&args[1])?);
            if b == 0.0 {
                return Err("division by zero".into());
            }
            Ok(if name == "DivideInt" {
                int(a / b)
            } else {
                Value::Float(a / b)
            })
        }
        "MaxFloat" | "MaxInt" | "MinFloat" | "MinInt" => {
            let values = numbers(args)?;
            if values.is_empty() {
                return Err(if name.starts_with("Max") {
                    "maximum undefined".into()
                } else {
                    "minimum undefined".into()
                });
            }
            let pick = if name.starts_with("Max") {
                f64::max
            } else {
                f64::min
            };
            let v = values.iter().copied().fold(values[0], pick);
            Ok(if name.ends_with("Int") {
                int(v)
            } else {
                Value::Float(v)
            })
        }
        "Mod" => {
            arity(args, 2)?;
            let (a, b) = (number(&args[0])? as i64, number(&args[1])? as i64);
            if b == 0 {
                return Err("integer divide by zero".into());
            }
            Ok(Value::Int(a % b))
        }
        "Ceil" => {
            arity(args, 1)?;
            Ok(Value::Float(number(&args[0])?.ceil()))
        }
        "RandInt" => {
            arity(args, 1)?;
            let n = number(&args[0])? as i64;
            if n < 0 {
                return Err("invalid argument to Intn".into());
            }
            Ok(Value::Int(rand::thread_rng().gen_range(0..=n)))
        }
        "RandIntRange" => {
            arity(args, 2)?;
            let (a, b) = (number(&args[0])? as i64, number(&args[1])? as i64);
            Ok(Value::Int(if a >= b {
                a
            } else {
                rand::thread_rng().gen_range(a..=b)
            }))
        }
        "RandData" => {
            arity(args, 1)?;
            let n = number(&args[0])?.max(0.0) as usize;
            Ok(Value::Str(random_data(n, &mut rand::thread_rng())))
        }
        // The same data for the same seed (an object's name), so that re-rendering a template
        // for an update leaves the object's payload as it was.
        "RandDataWithSeed" => {
            arity(args, 2)?;
            let n = number(&args[0])?.max(0.0) as usize;
            let mut seed = String::new();
            print(&args[1], &mut seed);
            let mut rng = rand::rngs::StdRng::seed_from_u64(fnv1a(seed.as_bytes()));
            Ok(Value::Str(random_data(n, &mut rng)))
        }
        "Concat" => {
            let mut joined = String::new();
            for arg in args {
                joined.push_str(string(arg, name)?);
            }
            Ok(Value::Str(joined))
        }
        "Seq" | "SliceOfZeros" => {
            arity(args, 1)?;
            let n = number(&args[0])?.max(0.0) as usize;
            Ok(Value::List(vec![Value::Int(0); n]))
        }
        "Loop" => {
            arity(args, 1)?;
            let n = number(&args[0])?.max(0.0) as i64;
            Ok(Value::List((0..n).map(Value::Int).collect()))
        }
        "IfThenElse" => {
            arity(args, 3)?;
            match &args[0] {
                Value::Bool(true) => Ok(args[1].clone()),
                Value::Bool(false) => Ok(args[2].clone()),
                other => Err(format!(
                    "incorrect argument type: got: {} want: bool",
                    other.type_name()
                )),
            }
        }
        "Lowercase" => {
            arity(args, 1)?;
            Ok(Value::Str(string(&args[0], name)?.to_lowercase()))
        }
        "StringSplit" => {
            arity(args, 1)?;
            Ok(Value::List(
                string(&args[0], name)?
                    .split(',')
                    .map(|s| Value::Str(s.to_string()))
                    .collect(),
            ))
        }
        "ExpandEnv" => {
            arity(args, 1)?;
            Ok(Value::Str(expand_env(string(&args[0], name)?)))
        }
        "IncludeFile" | "IncludeEmbedFile" => {
            arity(args, 1)?;
            let file = string(&args[0], name)?;
            let file = if name == "IncludeFile" {
                expand_env(file)
            } else {
                file.to_string()
            };
            let path = context.base_dir.join(&file);
            std::fs::read_to_string(&path)
                .map(Value::Str)
                .map_err(|e| format!("unable to read file {}: {e}", path.display()))
        }
        "YamlQuote" => {
            arity(args, 2)?;
            let text = string(&args[0], name)?;
            let Value::Int(tabs) = args[1] else {
                return Err(format!(
                    "incorrect argument type: got: {} want: int",
                    args[1].type_name()
                ));
            };
            let indent = "  ".repeat(tabs.max(0) as usize);
            Ok(Value::Str(
                yaml_quote(text).replace('\n', &format!("\n{indent}")),
            ))
        }
        _ => Err(format!("function {name:?} not defined")),
    }
}

/// `$VAR` and `${VAR}` from the environment, as Go's `os.ExpandEnv`.
fn expand_env(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, next) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], &inner[end + 1..]),
                None => ("", after),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        out.push_str(&std::env::var(name).unwrap_or_default());
        rest = next;
    }
    out.push_str(rest);
    out
}

/// A string as a YAML document with a trailing newline: plain where YAML reads it back as the
/// same string, else single-quoted.
fn yaml_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !matches!(
            Value::unpack(s),
            Value::Int(_) | Value::Float(_) | Value::Bool(_)
        )
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "null" | "~" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        format!("{s}\n")
    } else {
        format!("'{}'\n", s.replace('\'', "''"))
    }
}

fn index(container: Value, key: &Value) -> Result<Value, String> {
    match (container, key) {
        (Value::List(list), k) => {
            let i = match k {
                Value::Int(i) => *i,
                other => {
                    return Err(format!(
                        "cannot index slice/array with type {}",
                        other.type_name()
                    ))
                }
            };
            list.get(usize::try_from(i).unwrap_or(usize::MAX))
                .cloned()
                .ok_or_else(|| format!("index out of range: {i}"))
        }
        (Value::Str(s), Value::Int(i)) => s
            .as_bytes()
            .get(usize::try_from(*i).unwrap_or(usize::MAX))
            .map(|b| Value::Int(*b as i64))
            .ok_or_else(|| format!("index out of range: {i}")),
        (Value::Map(mut map), Value::Str(k)) => {
            Ok(map.remove(k).unwrap_or(Value::Missing(format!("[{k:?}]"))))
        }
        (Value::Nil, _) | (Value::Missing(_), _) => Err("index of untyped nil".into()),
        (other, _) => Err(format!("can't index item of type {}", other.type_name())),
    }
}

fn slice(args: &[Value]) -> Result<Value, String> {
    at_least(args, 1)?;
    let bounds: Vec<usize> = args[1..]
        .iter()
        .map(|v| match v {
            Value::Int(i) if *i >= 0 => Ok(*i as usize),
            _ => Err("slice bounds must be non-negative integers".to_string()),
        })
        .collect::<Result<_, _>>()?;
    let take = |len: usize| -> Result<(usize, usize), String> {
        let lo = bounds.first().copied().unwrap_or(0);
        let hi = bounds.get(1).copied().unwrap_or(len);
        if lo > hi || hi > len {
            return Err(format!("slice index out of range: [{lo}:{hi}] of {len}"));
        }
        Ok((lo, hi))
    };
    match &args[0] {
        Value::Str(s) => {
            let (lo, hi) = take(s.len())?;
            s.get(lo..hi)
                .map(|t| Value::Str(t.to_string()))
                .ok_or_else(|| "slice splits a character".to_string())
        }
        Value::List(l) => {
            let (lo, hi) = take(l.len())?;
            Ok(Value::List(l[lo..hi].to_vec()))
        }
        other => Err(format!("can't slice item of type {}", other.type_name())),
    }
}

/// Go's comparison for `eq`/`lt`/…: numbers by value, strings and bools by value, nil equal
/// to nil; `None` where the values are not ordered.
fn compare(a: &Value, b: &Value) -> Result<Option<Ordering>, String> {
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
            number(a)?.partial_cmp(&number(b)?)
        }
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (x, y) if x.is_nil() && y.is_nil() => Some(Ordering::Equal),
        (x, y) if x.is_nil() || y.is_nil() => Some(Ordering::Less),
        (Value::List(_) | Value::Map(_), _) | (_, Value::List(_) | Value::Map(_)) => {
            return Err("non-comparable type".into())
        }
        (x, y) => {
            return Err(format!(
                "incompatible types for comparison: {} and {}",
                x.type_name(),
                y.type_name()
            ))
        }
    })
}

fn escape(kind: &str, s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match (kind, c) {
            ("html", '<') => out.push_str("&lt;"),
            ("html", '>') => out.push_str("&gt;"),
            ("html", '&') => out.push_str("&amp;"),
            ("html", '"') => out.push_str("&#34;"),
            ("html", '\'') => out.push_str("&#39;"),
            ("js", '\\' | '\'' | '"' | '<' | '>' | '&' | '=') => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            ("urlquery", c) if c.is_ascii_alphanumeric() || "-_.~".contains(c) => out.push(c),
            ("urlquery", ' ') => out.push('+'),
            ("urlquery", c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            (_, c) => out.push(c),
        }
    }
    out
}
