//! Just enough DER to read a certificate's subject name.
//!
//! The server needs the client's CN and O to build a [`Peer`](crate::rpc::Peer), and the PKI
//! needs the CA's exact subject to issue certificates under it. rcgen can only parse
//! certificates with its `x509-parser` feature, so rather than pull in a full X.509 parser for
//! two fields this walks the few DER structures involved.

const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_OID: u8 = 0x06;
const TAG_INTEGER: u8 = 0x02;
const TAG_VERSION: u8 = 0xa0;

/// DER encodings of the attribute type OIDs we read (2.5.4.3 and 2.5.4.10).
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// One attribute of a distinguished name, as it appears on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameAttribute {
    /// DER content of the attribute type OID.
    pub oid: Vec<u8>,
    /// ASN.1 tag of the value (UTF8String, PrintableString, ...).
    pub tag: u8,
    pub value: Vec<u8>,
}

/// A certificate's subject: its raw DER and its attributes in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubjectName {
    /// The complete DER of the Name, which is what chain building compares with issuers.
    pub der: Vec<u8>,
    pub attributes: Vec<NameAttribute>,
}

impl SubjectName {
    /// Parses the subject out of a DER certificate.
    pub fn from_certificate(cert_der: &[u8]) -> Result<Self, String> {
        let (certificate, _) = expect(cert_der, TAG_SEQUENCE, "certificate")?;
        let (tbs, _) = expect(certificate.content, TAG_SEQUENCE, "tbsCertificate")?;
        let mut rest = tbs.content;
        let (first, after) = tlv(rest)?;
        // The version field is optional ([0] EXPLICIT, absent for v1).
        rest = if first.tag == TAG_VERSION {
            after
        } else {
            rest
        };
        let (_, after) = expect(rest, TAG_INTEGER, "serialNumber")?;
        let (_, after) = expect(after, TAG_SEQUENCE, "signature algorithm")?;
        let (_, after) = expect(after, TAG_SEQUENCE, "issuer")?;
        let (_, after) = expect(after, TAG_SEQUENCE, "validity")?;
        let (subject, _) = expect(after, TAG_SEQUENCE, "subject")?;
        Self::from_name(subject)
    }

    fn from_name(name: Tlv<'_>) -> Result<Self, String> {
        let mut attributes = Vec::new();
        let mut rdns = name.content;
        while !rdns.is_empty() {
            let (rdn, after) = expect(rdns, TAG_SET, "relative distinguished name")?;
            rdns = after;
            let mut atvs = rdn.content;
            while !atvs.is_empty() {
                let (atv, after) = expect(atvs, TAG_SEQUENCE, "attribute")?;
                atvs = after;
                let (oid, after) = expect(atv.content, TAG_OID, "attribute type")?;
                let (value, _) = tlv(after)?;
                attributes.push(NameAttribute {
                    oid: oid.content.to_vec(),
                    tag: value.tag,
                    value: value.content.to_vec(),
                });
            }
        }
        Ok(SubjectName {
            der: name.whole.to_vec(),
            attributes,
        })
    }

    /// The first common name (CN), if any.
    pub fn common_name(&self) -> Option<String> {
        self.values_of(OID_COMMON_NAME).next()
    }

    /// All organization (O) values, in order.
    pub fn organizations(&self) -> Vec<String> {
        self.values_of(OID_ORGANIZATION).collect()
    }

    fn values_of<'a>(&'a self, oid: &'a [u8]) -> impl Iterator<Item = String> + 'a {
        self.attributes
            .iter()
            .filter(move |a| a.oid == oid)
            .map(|a| String::from_utf8_lossy(&a.value).into_owned())
    }
}

/// Decodes DER OID content into its arcs (e.g. `[2, 5, 4, 3]`).
pub(crate) fn oid_arcs(content: &[u8]) -> Result<Vec<u64>, String> {
    let mut arcs = Vec::new();
    let mut value: u64 = 0;
    for (i, byte) in content.iter().enumerate() {
        value = value
            .checked_mul(128)
            .ok_or("OID arc overflows u64")?
            .saturating_add(u64::from(byte & 0x7f));
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                // The first subidentifier packs two arcs: 40 * first + second.
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        } else if i == content.len() - 1 {
            return Err("OID ends inside an arc".into());
        }
    }
    if arcs.is_empty() {
        return Err("empty OID".into());
    }
    Ok(arcs)
}

struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    /// Tag, length and content together.
    whole: &'a [u8],
}

fn expect<'a>(input: &'a [u8], tag: u8, what: &str) -> Result<(Tlv<'a>, &'a [u8]), String> {
    let (item, rest) = tlv(input).map_err(|e| format!("{what}: {e}"))?;
    if item.tag != tag {
        return Err(format!(
            "{what}: expected tag {tag:#04x}, found {:#04x}",
            item.tag
        ));
    }
    Ok((item, rest))
}

fn tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), String> {
    let (&tag, rest) = input.split_first().ok_or("unexpected end of DER")?;
    if tag & 0x1f == 0x1f {
        return Err("multi-byte DER tags are not supported".into());
    }
    let (&first_len, rest) = rest.split_first().ok_or("missing DER length")?;
    let (len, rest) = if first_len & 0x80 == 0 {
        (usize::from(first_len), rest)
    } else {
        let count = usize::from(first_len & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return Err("bad DER length".into());
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return Err("DER value runs past its container".into());
    }
    let header = input.len() - rest.len();
    Ok((
        Tlv {
            tag,
            content: &rest[..len],
            whole: &input[..header + len],
        },
        &rest[len..],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cn_and_organizations_from_rcgen_certificate() {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "node-1");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        let subject = SubjectName::from_certificate(cert.der()).expect("parse");
        assert_eq!(subject.common_name().as_deref(), Some("node-1"));
        assert_eq!(subject.organizations(), vec!["system:nodes".to_string()]);
    }

    #[test]
    fn decodes_oid_arcs() {
        assert_eq!(oid_arcs(OID_COMMON_NAME).expect("oid"), vec![2, 5, 4, 3]);
        // 1.2.840.113549 (RSA arc) exercises multi-byte arcs.
        assert_eq!(
            oid_arcs(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d]).expect("oid"),
            vec![1, 2, 840, 113549]
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(SubjectName::from_certificate(&[0x30, 0x05, 0x01]).is_err());
        assert!(SubjectName::from_certificate(&[]).is_err());
    }
}
