//! A certificate's subject, read with `x509-parser`: the client's CN and O values (user and
//! groups, as Kubernetes' x509 authenticator reads them), and the CA's subject in DER, which
//! the certificates it issues must name as their issuer byte for byte.

use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::x509::AttributeTypeAndValue;

/// A certificate's subject: its raw DER and the attributes kemu reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubjectName {
    /// The complete DER of the Name, which is what chain building compares with issuers.
    pub der: Vec<u8>,
    common_name: Option<String>,
    organizations: Vec<String>,
}

impl SubjectName {
    /// Parses the subject out of a DER certificate.
    pub fn from_certificate(cert_der: &[u8]) -> Result<Self, String> {
        let (_, certificate) = X509Certificate::from_der(cert_der)
            .map_err(|e| format!("not an X.509 certificate: {e}"))?;
        let subject = certificate.subject();
        let name = SubjectName {
            der: subject.as_raw().to_vec(),
            common_name: subject.iter_common_name().next().map(text),
            organizations: subject.iter_organization().map(text).collect(),
        };
        Ok(name)
    }

    /// The first common name (CN), if any.
    pub fn common_name(&self) -> Option<String> {
        self.common_name.clone()
    }

    /// All organization (O) values, in order.
    pub fn organizations(&self) -> Vec<String> {
        self.organizations.clone()
    }
}

/// An attribute's value as text; a string type x509-parser does not decode (BMPString,
/// UniversalString) is read as lossy UTF-8 rather than refusing the certificate.
fn text(attribute: &AttributeTypeAndValue<'_>) -> String {
    match attribute.as_str() {
        Ok(s) => s.to_string(),
        Err(_) => String::from_utf8_lossy(attribute.attr_value().data).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(names: &[(rcgen::DnType, &str)]) -> Vec<u8> {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (ty, value) in names {
            params.distinguished_name.push(ty.clone(), *value);
        }
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().to_vec()
    }

    #[test]
    fn reads_cn_and_organizations_from_rcgen_certificate() {
        let der = certificate(&[
            (rcgen::DnType::CommonName, "node-1"),
            (rcgen::DnType::OrganizationName, "system:nodes"),
        ]);
        let subject = SubjectName::from_certificate(&der).expect("parse");
        assert_eq!(subject.common_name().as_deref(), Some("node-1"));
        assert_eq!(subject.organizations(), vec!["system:nodes".to_string()]);
    }

    #[test]
    fn several_organizations_keep_their_order_and_a_missing_cn_is_none() {
        let der = certificate(&[
            (rcgen::DnType::OrganizationName, "system:masters"),
            (rcgen::DnType::CustomDnType(vec![2, 5, 4, 10]), "devs"),
            (rcgen::DnType::CountryName, "DE"),
        ]);
        let subject = SubjectName::from_certificate(&der).expect("parse");
        assert_eq!(subject.common_name(), None);
        assert_eq!(subject.organizations(), vec!["system:masters", "devs"]);
        // The raw subject is a DER SEQUENCE that holds every attribute.
        assert_eq!(subject.der.first(), Some(&0x30));
        assert!(subject.der.windows(4).any(|w| w == b"devs"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(SubjectName::from_certificate(&[0x30, 0x05, 0x01]).is_err());
        assert!(SubjectName::from_certificate(&[]).is_err());
    }
}
