//! The syntax of names, keys and values (apimachinery's `util/validation`): RFC 1123 labels and
//! subdomains, RFC 1035 labels, qualified names (label and annotation keys), label values,
//! ConfigMap keys, port names and path segments. Each check returns Kubernetes' own messages,
//! empty when the string is valid; the API server's validation turns them into field causes, and
//! label selectors use them to reject malformed keys and values.

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const CONFIG_KEY_MAX: usize = 253;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const CONFIG_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// apimachinery's `RegexError`: the message, examples and the pattern.
fn regex_error(msg: &str, pattern: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{pattern}')");
    }
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{pattern}')",
        examples.join(" or ")
    )
}

fn is_alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (with `first` overriding the first character's class).
fn matches_label(s: &str, first: fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            first(f) && is_alnum_lower(l) && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
        }
        _ => false,
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn matches_qualified(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Checks an RFC 1123 label (namespace names, container names); returns Kubernetes' messages.
pub fn is_dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_label(s, is_alnum_lower) {
        errs.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// Checks an RFC 1123 subdomain (most object names); returns Kubernetes' messages.
pub fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if s.is_empty()
        || !s
            .split('.')
            .all(|label| matches_label(label, is_alnum_lower))
    {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Checks an RFC 1035 label (service names); returns Kubernetes' messages.
pub fn is_dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_label(s, |c| c.is_ascii_lowercase()) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// Checks a qualified name (label and annotation keys): `[prefix/]name`.
pub fn is_qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !matches_qualified(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Checks a label value: empty, or at most 63 characters of the qualified-name alphabet.
pub fn is_valid_label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !s.is_empty() && !matches_qualified(s) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Checks a ConfigMap or Secret data key.
pub fn is_config_map_key(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > CONFIG_KEY_MAX {
        errs.push(max_len_error(CONFIG_KEY_MAX));
    }
    if s.is_empty()
        || !s
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        errs.push(regex_error(
            CONFIG_KEY_MSG,
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if s == "." {
        errs.push("must not be '.'".to_string());
    } else if s == ".." {
        errs.push("must not be '..'".to_string());
    } else if s.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// Checks a port name (IANA service name syntax).
pub fn is_valid_port_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 15 {
        errs.push(max_len_error(15));
    }
    if s.is_empty() || !s.bytes().all(|c| is_alnum_lower(c) || c == b'-') {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !s.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if s.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if s.starts_with('-') || s.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// Kubernetes' `IsValidPathSegmentName`: anything that can stand in a URL path segment.
pub fn is_path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| s.contains(*bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules_and_messages() {
        assert_eq!(
            is_dns1123_subdomain("Foo_Bar"),
            vec!["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
        );
        assert_eq!(
            is_dns1123_label("a.b"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert!(is_dns1123_subdomain("a.example-1.com").is_empty());
        assert!(is_dns1123_label("123-abc").is_empty());
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(!is_dns1035_label("1abc").is_empty());
        assert!(is_qualified_name("example.com/My_Name.1").is_empty());
        assert!(!is_qualified_name("a/b/c").is_empty());
        assert!(!is_qualified_name("/b").is_empty());
        assert!(is_valid_label_value("").is_empty());
        assert!(!is_valid_label_value("-x").is_empty());
        assert_eq!(is_config_map_key(".."), vec!["must not be '..'"]);
        assert!(is_valid_port_name("http-alt").is_empty());
        assert!(!is_valid_port_name("this-name-is-too-long").is_empty());
    }
}
