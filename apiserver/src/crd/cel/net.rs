//! Kubernetes' CEL IP and CIDR libraries: `ip(string)`, `isIP(string)`,
//! `ip.isCanonical(string)`, `cidr(string)`, `isCIDR(string)`, `string(ip)`, `string(cidr)`
//! and the members of a `net.IP` (`family`, `isUnspecified`, `isLoopback`,
//! `isLinkLocalMulticast`, `isLinkLocalUnicast`, `isGlobalUnicast`) and of a `net.CIDR`
//! (`containsIP`, `containsCIDR`, `ip`, `masked`, `prefixLength`), with Go's `net/netip`
//! semantics and error texts (zones and IPv4-mapped IPv6 addresses are refused).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::common::types::Type;
use cel::common::value::{CowVal, Val};
use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, DeclarationError, Env, ExecutionError, Value as CelValue};

/// The CEL type name of an IP address.
pub const IP_TYPE_NAME: &str = "net.IP";
/// The CEL type name of a CIDR.
pub const CIDR_TYPE_NAME: &str = "net.CIDR";

/// An IP address as a CEL value.
#[derive(Debug, PartialEq, Eq)]
pub struct CelIp(pub IpAddr);

impl Opaque for CelIp {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE_NAME
    }
}

/// A prefix as a CEL value: its address as written (not masked) and its length, equal only
/// when both are, as `netip.Prefix` compares.
#[derive(Debug, PartialEq, Eq)]
pub struct CelCidr {
    pub addr: IpAddr,
    pub bits: u8,
}

impl Opaque for CelCidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE_NAME
    }
}

/// Declares the libraries' overloads of the environment's own functions: `string(ip)` and
/// `string(cidr)`, the address (and prefix length) in `netip`'s canonical form.
pub fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "string",
        "ip_to_string",
        vec![Type::new_opaque_type(IP_TYPE_NAME)],
        to_string,
    )?;
    env.add_overload(
        "string",
        "cidr_to_string",
        vec![Type::new_opaque_type(CIDR_TYPE_NAME)],
        to_string,
    )
}

/// `string(ip)` and `string(cidr)`.
fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = match args.first() {
        Some(arg) => CelValue::try_from(arg.as_ref())?,
        None => return Err(no_overload("string")),
    };
    let text = match &value {
        CelValue::Opaque(o) => match (o.downcast_ref::<CelIp>(), o.downcast_ref::<CelCidr>()) {
            (Some(ip), _) => ip.0.to_string(),
            (_, Some(cidr)) => format!("{}/{}", cidr.addr, cidr.bits),
            _ => return Err(no_overload("string")),
        },
        _ => return Err(no_overload("string")),
    };
    let boxed: Box<dyn Val> = CelValue::String(Arc::new(text)).try_into()?;
    Ok(CowVal::Owned(boxed))
}

/// `ip.isCanonical(text)`: whether `text` is the address as `netip` writes it (every IPv4
/// address is; IPv6 in lower case with the longest run of zero groups elided).
pub fn is_canonical(text: &str) -> Result<bool, ExecutionError> {
    parse_ip(text).map(|ip| ip.to_string() == text)
}

/// Adds the libraries' functions to an evaluation's context.
pub fn register(context: &mut Context<'_, '_>) {
    let _ = context.add_function("ip.isCanonical", |This(s): This<Arc<String>>| {
        is_canonical(&s)
    });
    // None of these names is the environment's, so adding them cannot conflict.
    let _ = context.add_function("ip", |This(v): This<CelValue>| match &v {
        // `ip(string)`, and `cidr.ip()`: the prefix's address.
        CelValue::String(s) => parse_ip(s).map(ip_value),
        other => cidr_of(other, "ip").map(|c| ip_value(c.addr)),
    });
    let _ = context.add_function("isIP", |This(s): This<Arc<String>>| parse_ip(&s).is_ok());
    let _ = context.add_function("cidr", |This(s): This<Arc<String>>| {
        parse_cidr(&s).map(cidr_value)
    });
    let _ = context.add_function("isCIDR", |This(s): This<Arc<String>>| {
        parse_cidr(&s).is_ok()
    });
    let _ = context.add_function("family", |This(v): This<CelValue>| {
        ip_of(&v, "family").map(|ip| if ip.is_ipv4() { 4i64 } else { 6 })
    });
    let _ = context.add_function("isUnspecified", |This(v): This<CelValue>| {
        ip_of(&v, "isUnspecified").map(|ip| ip.is_unspecified())
    });
    let _ = context.add_function("isLoopback", |This(v): This<CelValue>| {
        ip_of(&v, "isLoopback").map(|ip| ip.is_loopback())
    });
    let _ = context.add_function("isLinkLocalMulticast", |This(v): This<CelValue>| {
        ip_of(&v, "isLinkLocalMulticast").map(is_link_local_multicast)
    });
    let _ = context.add_function("isLinkLocalUnicast", |This(v): This<CelValue>| {
        ip_of(&v, "isLinkLocalUnicast").map(is_link_local_unicast)
    });
    let _ = context.add_function("isGlobalUnicast", |This(v): This<CelValue>| {
        ip_of(&v, "isGlobalUnicast").map(is_global_unicast)
    });
    let _ = context.add_function("containsIP", |This(v): This<CelValue>, other: CelValue| {
        let cidr = cidr_of(&v, "containsIP")?;
        let ip = match &other {
            CelValue::String(s) => parse_ip(s)?,
            other => ip_of(other, "containsIP")?,
        };
        Ok::<_, ExecutionError>(contains(cidr.addr, cidr.bits, ip))
    });
    let _ = context.add_function(
        "containsCIDR",
        |This(v): This<CelValue>, other: CelValue| {
            let cidr = cidr_of(&v, "containsCIDR")?;
            let parsed;
            let inner = match &other {
                CelValue::String(s) => {
                    parsed = parse_cidr(s)?;
                    &parsed
                }
                other => cidr_of(other, "containsCIDR")?,
            };
            Ok::<_, ExecutionError>(
                cidr.bits <= inner.bits && contains(cidr.addr, cidr.bits, inner.addr),
            )
        },
    );
    let _ = context.add_function("prefixLength", |This(v): This<CelValue>| {
        cidr_of(&v, "prefixLength").map(|c| i64::from(c.bits))
    });
    let _ = context.add_function("masked", |This(v): This<CelValue>| {
        cidr_of(&v, "masked").map(|c| {
            cidr_value(CelCidr {
                addr: mask(c.addr, c.bits),
                bits: c.bits,
            })
        })
    });
}

fn ip_value(ip: IpAddr) -> CelValue {
    CelValue::Opaque(Arc::new(CelIp(ip)))
}

fn cidr_value(cidr: CelCidr) -> CelValue {
    CelValue::Opaque(Arc::new(cidr))
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

fn ip_of(value: &CelValue, function: &str) -> Result<IpAddr, ExecutionError> {
    match value {
        CelValue::Opaque(o) => o
            .downcast_ref::<CelIp>()
            .map(|ip| ip.0)
            .ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

fn cidr_of<'v>(value: &'v CelValue, function: &str) -> Result<&'v CelCidr, ExecutionError> {
    match value {
        CelValue::Opaque(o) => o
            .downcast_ref::<CelCidr>()
            .ok_or_else(|| no_overload(function)),
        _ => Err(no_overload(function)),
    }
}

/// `ip(text)` as kube-apiserver parses it (`netip.ParseAddr`, no zone, not IPv4-mapped).
pub fn parse_ip(text: &str) -> Result<IpAddr, ExecutionError> {
    let error = |message: String| ExecutionError::function_error("ip", message);
    let addr = parse_addr(text).map_err(|e| {
        error(format!(
            "IP Address {text:?} parse error during conversion from string: {e}"
        ))
    })?;
    if text.contains('%') {
        return Err(error(format!(
            "IP address {text:?} with zone value is not allowed"
        )));
    }
    if is_4_in_6(addr) {
        return Err(error(format!(
            "IPv4-mapped IPv6 address {text:?} is not allowed"
        )));
    }
    Ok(addr)
}

/// `cidr(text)` as kube-apiserver parses it (`netip.ParsePrefix`, not IPv4-mapped); its
/// error is wrapped twice in kube-apiserver's words, as upstream does.
pub fn parse_cidr(text: &str) -> Result<CelCidr, ExecutionError> {
    const WRAP: &str = "network address parse error during conversion from string";
    let error = |message: String| ExecutionError::function_error("cidr", message);
    let cidr = parse_prefix(text).map_err(|e| error(format!("{WRAP}: {WRAP}: {e}")))?;
    if is_4_in_6(cidr.addr) {
        return Err(error(format!(
            "{WRAP}: IPv4-mapped IPv6 address {text:?} is not allowed"
        )));
    }
    Ok(cidr)
}

/// `netip.ParseAddr`: the address, zone allowed (and dropped), or Go's error text.
fn parse_addr(text: &str) -> Result<IpAddr, String> {
    let failed = |message: &str| format!("ParseAddr({text:?}): {message}");
    if text.is_empty() {
        return Err(failed("unable to parse IP"));
    }
    if text.contains(':') {
        let (address, zone) = match text.split_once('%') {
            Some((a, z)) => (a, Some(z)),
            None => (text, None),
        };
        if zone == Some("") {
            return Err(failed("zone must be a non-empty string"));
        }
        return address
            .parse::<Ipv6Addr>()
            .map(IpAddr::V6)
            .map_err(|_| failed("unable to parse IP"));
    }
    if text.contains('.') {
        return parse_ipv4(text).map(IpAddr::V4).map_err(|m| failed(&m));
    }
    Err(failed("unable to parse IP"))
}

/// Go's `parseIPv4`, for its error texts.
fn parse_ipv4(text: &str) -> Result<Ipv4Addr, String> {
    let mut fields = [0u8; 4];
    let mut value: u32 = 0;
    let mut digits = 0;
    let mut index = 0;
    for (i, c) in text.char_indices() {
        match c {
            '0'..='9' => {
                if digits == 1 && value == 0 {
                    return Err("IPv4 field has octet with leading zero".into());
                }
                value = value * 10 + (c as u32 - '0' as u32);
                digits += 1;
                if value > 255 {
                    return Err("IPv4 field has value >255".into());
                }
            }
            '.' => {
                if i == 0 || i == text.len() - 1 || digits == 0 {
                    return Err(format!(
                        "IPv4 field must have at least one digit (at {:?})",
                        &text[i..]
                    ));
                }
                if index == 3 {
                    return Err("IPv4 address too long".into());
                }
                fields[index] = value as u8;
                index += 1;
                value = 0;
                digits = 0;
            }
            _ => {
                return Err(format!("unexpected character (at {:?})", &text[i..]));
            }
        }
    }
    if index < 3 {
        return Err("IPv4 address too short".into());
    }
    fields[3] = value as u8;
    Ok(Ipv4Addr::from(fields))
}

/// `netip.ParsePrefix`.
fn parse_prefix(text: &str) -> Result<CelCidr, String> {
    let failed = |message: String| format!("netip.ParsePrefix({text:?}): {message}");
    let Some((address, bits)) = text.rsplit_once('/') else {
        return Err(failed("no '/'".into()));
    };
    let addr = parse_addr(address).map_err(failed)?;
    if address.contains('%') {
        return Err(failed("IPv6 zones cannot be present in a prefix".into()));
    }
    let valid = !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && !(bits.len() > 1 && bits.starts_with('0'));
    let bits: u8 = match bits.parse() {
        Ok(n) if valid => n,
        _ => return Err(failed(format!("bad bits after slash: {bits:?}"))),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if bits > max {
        return Err(failed("prefix length out of range".into()));
    }
    Ok(CelCidr { addr, bits })
}

fn is_4_in_6(addr: IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// `addr` with every bit past the first `bits` cleared.
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

/// Whether `ip` lies in the prefix: same family, same masked bits.
fn contains(addr: IpAddr, bits: u8, ip: IpAddr) -> bool {
    addr.is_ipv4() == ip.is_ipv4() && mask(addr, bits) == mask(ip, bits)
}

fn is_link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xff && o[1] & 0x0f == 0x02
        }
    }
}

fn is_link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `IsGlobalUnicast`: private addresses count, as in package net.
fn is_global_unicast(ip: IpAddr) -> bool {
    let multicast = match ip {
        IpAddr::V4(v4) => v4.is_multicast() || v4.is_broadcast(),
        IpAddr::V6(v6) => v6.octets()[0] == 0xff,
    };
    !ip.is_unspecified() && !ip.is_loopback() && !multicast && !is_link_local_unicast(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_with_go_texts() {
        assert_eq!(parse_addr("10.0.0.1"), Ok("10.0.0.1".parse().unwrap()));
        assert_eq!(
            parse_addr("1.2.3.256").unwrap_err(),
            "ParseAddr(\"1.2.3.256\"): IPv4 field has value >255"
        );
        assert_eq!(
            parse_addr("nope").unwrap_err(),
            "ParseAddr(\"nope\"): unable to parse IP"
        );
        assert_eq!(
            parse_addr("1.2.3").unwrap_err(),
            "ParseAddr(\"1.2.3\"): IPv4 address too short"
        );
        assert!(parse_ip("::ffff:1.2.3.4").is_err());
        assert!(parse_ip("fe80::1%eth0").is_err());
        assert_eq!(
            parse_prefix("10.0.0.0/33").unwrap_err(),
            "netip.ParsePrefix(\"10.0.0.0/33\"): prefix length out of range"
        );
        assert_eq!(
            parse_prefix("10.0.0.0").unwrap_err(),
            "netip.ParsePrefix(\"10.0.0.0\"): no '/'"
        );
    }

    #[test]
    fn classes_follow_netip() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(is_link_local_multicast(ip("224.0.0.1")));
        assert!(!is_link_local_multicast(ip("224.0.1.1")));
        assert!(is_link_local_multicast(ip("ff02::1")));
        assert!(is_link_local_unicast(ip("169.254.169.254")));
        assert!(is_link_local_unicast(ip("fe80::1")));
        assert!(!is_link_local_unicast(ip("fd80::1")));
        assert!(is_global_unicast(ip("192.168.0.1")));
        assert!(!is_global_unicast(ip("255.255.255.255")));
        assert!(is_global_unicast(ip("2001:db8::abcd")));
        assert!(!is_global_unicast(ip("ff00::1")));
        assert_eq!(mask(ip("192.168.7.9"), 16), ip("192.168.0.0"));
        assert_eq!(mask(ip("192.168.7.9"), 0), ip("0.0.0.0"));
        assert!(contains(ip("10.0.0.0"), 8, ip("10.1.2.3")));
        assert!(!contains(ip("10.0.0.0"), 8, ip("11.0.0.1")));
        assert!(!contains(ip("::"), 0, ip("10.0.0.1")));
    }
}
