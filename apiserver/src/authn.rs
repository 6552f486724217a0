//! Authentication: who is asking.
//!
//! The ways in, as kube-apiserver's: a client certificate signed by the cluster CA (the TLS
//! layer has already verified it; CN is the user, each O a group), a bearer token from the
//! static token file (`--token-auth-file`, Kubernetes' CSV format `token,user,uid,"g1,g2"`),
//! and a service account token (see [`crate::service_account_tokens`]).
//! Everyone authenticated is also in `system:authenticated`. There is no anonymous user: a
//! request with neither gets 401, except on the paths [`is_public_path`] names.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::errors::ApiError;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group whose members may do anything (checked before RBAC, as Kubernetes does).
pub const MASTERS: &str = "system:masters";
/// The group of node hosts' certificates.
pub const NODES: &str = "system:nodes";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    /// Includes [`AUTHENTICATED`].
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with `groups`, plus `system:authenticated`.
    pub fn new(name: impl Into<String>, uid: impl Into<String>, groups: Vec<String>) -> UserInfo {
        let mut groups = groups;
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        UserInfo {
            name: name.into(),
            uid: uid.into(),
            groups,
        }
    }

    /// The user a verified client certificate names: CN is the user, the O values its groups.
    pub fn from_certificate(common_name: &str, organizations: &[String]) -> UserInfo {
        UserInfo::new(common_name, "", organizations.to_vec())
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// Paths anyone may read without credentials (kube-apiserver's `system:public-info-viewer`).
pub fn is_public_path(path: &str) -> bool {
    matches!(
        path.trim_end_matches('/'),
        "/healthz" | "/livez" | "/readyz" | "/version"
    )
}

/// Why the token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token file {path}, line {line}: {reason}")]
    Line {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// The static bearer tokens.
#[derive(Debug, Default, Clone)]
pub struct TokenFile {
    tokens: HashMap<String, Arc<UserInfo>>,
}

impl TokenFile {
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        TokenFile::parse(&text).map_err(|(line, reason)| TokenFileError::Line {
            path: path.to_path_buf(),
            line,
            reason,
        })
    }

    /// Parses the CSV text; an error names the (1-based) line and what is wrong with it.
    pub fn parse(text: &str) -> Result<TokenFile, (usize, String)> {
        let mut tokens = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let number = i + 1;
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fields = split_csv(trimmed).map_err(|reason| (number, reason))?;
            if fields.len() < 3 {
                return Err((
                    number,
                    format!(
                        "expected token,user,uid[,\"group1,group2\"], found {} field(s)",
                        fields.len()
                    ),
                ));
            }
            let (token, user, uid) = (&fields[0], &fields[1], &fields[2]);
            if token.is_empty() {
                return Err((number, "the token is empty".into()));
            }
            if user.is_empty() {
                return Err((number, "the user name is empty".into()));
            }
            let groups: Vec<String> = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            if tokens
                .insert(
                    token.clone(),
                    Arc::new(UserInfo::new(user.clone(), uid.clone(), groups)),
                )
                .is_some()
            {
                return Err((number, "the token appears twice".into()));
            }
        }
        Ok(TokenFile { tokens })
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    fn user(&self, token: &str) -> Option<&Arc<UserInfo>> {
        self.tokens.get(token)
    }
}

/// Splits one CSV record: fields separated by commas, a field in double quotes may hold commas,
/// `""` inside quotes is one quote; spaces before a field are dropped.
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("a quoted field is not closed".into()),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(c) => return Err(format!("unexpected {c:?} after a quoted field")),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some('"') => return Err("a quote inside an unquoted field".into()),
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

/// Decides who a request is from.
#[derive(Default)]
pub struct Authenticator {
    tokens: TokenFile,
    service_accounts: Option<Arc<crate::service_account_tokens::ServiceAccountTokens>>,
}

impl Authenticator {
    pub fn new(tokens: TokenFile) -> Authenticator {
        Authenticator {
            tokens,
            service_accounts: None,
        }
    }

    /// Also takes the service account tokens `service_accounts` signed.
    pub fn with_service_accounts(
        mut self,
        service_accounts: Arc<crate::service_account_tokens::ServiceAccountTokens>,
    ) -> Authenticator {
        self.service_accounts = Some(service_accounts);
        self
    }

    /// The signer of service account tokens, when this server has one.
    pub fn service_accounts(
        &self,
    ) -> Option<&Arc<crate::service_account_tokens::ServiceAccountTokens>> {
        self.service_accounts.as_ref()
    }

    /// The user of a request: its verified client certificate wins (as kube-apiserver tries
    /// x509 first), else its bearer token. A missing or unknown credential is 401.
    pub fn authenticate(
        &self,
        certificate: Option<&Arc<UserInfo>>,
        authorization: Option<&[u8]>,
    ) -> Result<Arc<UserInfo>, ApiError> {
        if let Some(user) = certificate {
            return Ok(user.clone());
        }
        let token = authorization
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(bearer_token);
        let Some(token) = token else {
            return Err(unauthorized());
        };
        if let Some(user) = self.tokens.user(token) {
            return Ok(user.clone());
        }
        self.service_accounts
            .as_ref()
            .and_then(|s| s.authenticate(token))
            .map(Arc::new)
            .ok_or_else(unauthorized)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive).
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// kube-apiserver's answer to a request without valid credentials.
pub fn unauthorized() -> ApiError {
    ApiError::Unauthorized {
        message: "Unauthorized".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_token_files() {
        let file = TokenFile::parse(
            "# comment\n\
             s3cret,alice,u1,\"dev,qa\"\n\
             t2, bob, u2\n\
             t3,carol,u3,ops\n",
        )
        .expect("parse");
        assert_eq!(file.len(), 3);
        let alice = file.user("s3cret").expect("alice");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "u1");
        assert_eq!(alice.groups, ["dev", "qa", AUTHENTICATED]);
        assert_eq!(file.user("t2").expect("bob").groups, [AUTHENTICATED]);
        assert_eq!(
            file.user("t3").expect("carol").groups,
            ["ops", AUTHENTICATED]
        );
    }

    #[test]
    fn token_file_errors_name_the_line() {
        assert_eq!(
            TokenFile::parse("a,b,c\nonly,two\n").err().map(|e| e.0),
            Some(2)
        );
        assert_eq!(TokenFile::parse("a,b,\"c\n").err().map(|e| e.0), Some(1));
        assert_eq!(
            TokenFile::parse("a,b,c\na,d,e\n").err(),
            Some((2, "the token appears twice".to_string()))
        );
        assert_eq!(
            TokenFile::parse(",b,c\n").err(),
            Some((1, "the token is empty".to_string()))
        );
    }

    #[test]
    fn certificate_wins_then_token_then_401() {
        let tokens = TokenFile::parse("tok,alice,1\n").expect("parse");
        let authn = Authenticator::new(tokens);
        let cert = Arc::new(UserInfo::from_certificate(
            "admin",
            &["system:masters".to_string()],
        ));
        let who = authn
            .authenticate(Some(&cert), Some(b"Bearer wrong"))
            .expect("cert");
        assert_eq!(who.name, "admin");
        assert!(who.in_group(AUTHENTICATED) && who.in_group(MASTERS));
        let who = authn
            .authenticate(None, Some(b"bearer tok"))
            .expect("token");
        assert_eq!(who.name, "alice");
        for header in [
            None,
            Some(&b"Bearer nope"[..]),
            Some(b"Basic tok"),
            Some(b"Bearer "),
        ] {
            let e = authn.authenticate(None, header).expect_err("401");
            assert_eq!(e.code(), 401);
            assert_eq!(e.status()["message"], "Unauthorized");
            assert_eq!(e.status()["reason"], "Unauthorized");
        }
    }

    #[test]
    fn public_paths() {
        assert!(is_public_path("/healthz"));
        assert!(is_public_path("/version/"));
        assert!(!is_public_path("/metrics"));
        assert!(!is_public_path("/api"));
    }
}
