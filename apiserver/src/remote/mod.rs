//! `pods/exec`, `pods/attach` and `pods/portforward`: WebSocket sessions with an emulated
//! container.
//!
//! The API server answers these itself instead of proxying to the node host, as
//! kube-apiserver proxies to the kubelet: an emulated container has no process to reach, and
//! everything an exec can observe — the pod's spec and status, its ConfigMaps and Secrets — is
//! in the API server's storage. A client sees what it would see from kube-apiserver: the same
//! checks before the upgrade (and the same error statuses and texts), the same channel
//! protocols, the same outcome on the error channel. Attach is the exception that reaches
//! the node host: it follows the container's log, which only the node host has.
//!
//! - [`channel`]: the channel protocols and their framing; [`stdio`]: an exec's streams.
//! - [`script`] and [`shell`]: the commands an emulated container runs; [`container`]: its
//!   environment and files.
//! - [`session`]: the checks, the WebSocket upgrade and the exec and attach sessions;
//!   [`port_forward`]: the emulated listeners behind declared container ports, over the
//!   channel protocols or kubectl's SPDY tunnel ([`spdy`]);
//! - [`spdy_upgrade`]: the same sessions over a plain SPDY/3.1 upgrade (client-go before
//!   1.30), bridged to the channel protocol.

pub mod channel;
pub mod container;
pub mod port_forward;
pub mod script;
pub mod session;
pub mod shell;
pub mod spdy;
pub mod spdy_upgrade;
pub mod stdio;

pub use session::serve;
