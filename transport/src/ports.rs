//! Free loopback ports for processes that are told their address before they bind it (tests and
//! the launcher's local clusters).

/// `n` distinct loopback ports, each bindable for both TCP and UDP when chosen.
///
/// They come from below the kernel's ephemeral range (32768–60999 by default): a port the kernel
/// hands out for a bind to port 0 is free again the moment it is dropped, and the next QUIC client
/// or outgoing connection — of this process or of a parallel test's cluster — may take it before
/// the component it was meant for binds it ("Address already in use"). Ports below that range are
/// only ever taken by someone who chose them, so checking that both TCP and UDP can bind one is
/// enough. `None` if no free port turned up after many tries.
pub fn free_loopback_ports(n: usize) -> Option<Vec<u16>> {
    use rand::Rng;
    let (low, high) = (10_000u16, 32_000u16);
    let mut rng = rand::thread_rng();
    let mut ports = Vec::with_capacity(n);
    for _ in 0..10_000 {
        if ports.len() == n {
            break;
        }
        let port = rng.gen_range(low..high);
        if ports.contains(&port) {
            continue;
        }
        let tcp = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        let udp = std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok();
        if tcp && udp {
            ports.push(port);
        }
    }
    (ports.len() == n).then_some(ports)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_are_distinct_below_the_ephemeral_range_and_bindable() {
        let ports = super::free_loopback_ports(20).expect("free ports");
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 20);
        for port in ports {
            assert!((10_000..32_000).contains(&port), "{port}");
            std::net::UdpSocket::bind(("127.0.0.1", port)).expect("still free");
        }
    }
}
