//! [`Addressing`]: where every emulated node's addresses come from. Each node gets one pod
//! range (podCIDR) per IP family, cut from the cluster CIDR(s) in index order as
//! kube-controller-manager's range allocator hands them out (`--cluster-cidr`,
//! `--node-cidr-mask-size`, `--node-cidr-mask-size-ipv4/-ipv6`), and one InternalIP per family
//! from the node IP range(s). Pod IPs come from the node's ranges ([`PodIpPool`]).
//!
//! Pure arithmetic: the node host derives its nodes' addresses from it, and the launcher checks
//! with [`Addressing::check`] that a config's node count and pods per node fit before it starts
//! anything.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The pod ranges of today's clusters: `10.128.0.0/9` in /24s (32,768 nodes).
pub const DEFAULT_CLUSTER_CIDR: &str = "10.128.0.0/9";
/// The node addresses: `100.64.0.0/10` (shared address space, never routed; only a label here).
pub const DEFAULT_NODE_IP_CIDR: &str = "100.64.0.0/10";
/// kube-controller-manager's defaults for `--node-cidr-mask-size-ipv4` and `-ipv6`.
pub const DEFAULT_NODE_MASK_IPV4: u8 = 24;
pub const DEFAULT_NODE_MASK_IPV6: u8 = 64;

/// An addressing setting that cannot work; `key` is the config key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct AddressingError {
    pub key: String,
    pub reason: String,
}

/// An IPv4 or IPv6 network: an address with its host bits zero and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `10.128.0.0/9`, `fd00:10::/48`. Host bits must be zero, as in a podCIDR.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let bad = || format!("{text:?} is not a CIDR such as 10.128.0.0/9 or fd00:10::/48");
        let (addr, len) = text.trim().split_once('/').ok_or_else(bad)?;
        let network: IpAddr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = len.parse().map_err(|_| bad())?;
        let cidr = Cidr { network, prefix };
        if prefix > cidr.bits() {
            return Err(bad());
        }
        if cidr.offset_bits() < 128 && cidr.base() & ((1u128 << cidr.offset_bits()) - 1) != 0 {
            return Err(format!(
                "{text:?} has host bits set (its network is {})",
                Cidr::from_base(
                    cidr.is_ipv6(),
                    cidr.base() & !((1u128 << cidr.offset_bits()) - 1),
                    prefix
                )
            ));
        }
        Ok(cidr)
    }

    pub fn is_ipv6(&self) -> bool {
        self.network.is_ipv6()
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    fn bits(&self) -> u8 {
        if self.is_ipv6() {
            128
        } else {
            32
        }
    }

    /// Host bits: log2 of the number of addresses.
    fn offset_bits(&self) -> u8 {
        self.bits() - self.prefix
    }

    fn base(&self) -> u128 {
        match self.network {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        }
    }

    fn from_base(ipv6: bool, base: u128, prefix: u8) -> Cidr {
        Cidr {
            network: address(ipv6, base),
            prefix,
        }
    }

    /// How many addresses it holds (saturating at `u128::MAX` for a /0 of IPv6).
    pub fn size(&self) -> u128 {
        pow2(self.offset_bits())
    }

    /// How many /`mask` subnets it holds (0 if `mask` is shorter than its prefix).
    pub fn subnet_count(&self, mask: u8) -> u128 {
        if mask < self.prefix || mask > self.bits() {
            0
        } else {
            pow2(mask - self.prefix)
        }
    }

    /// Its `n`-th /`mask` subnet, if it has one.
    pub fn subnet(&self, mask: u8, n: u128) -> Option<Cidr> {
        if n >= self.subnet_count(mask) {
            return None;
        }
        let step = self.bits() - mask;
        let offset = if step >= 128 { 0 } else { n << step };
        Some(Cidr::from_base(self.is_ipv6(), self.base() + offset, mask))
    }

    /// The address `offset` places after the network address, if inside.
    pub fn nth(&self, offset: u128) -> Option<IpAddr> {
        (offset < self.size()).then(|| address(self.is_ipv6(), self.base() + offset))
    }

    /// Where `ip` lies in it, if inside.
    pub fn offset_of(&self, ip: IpAddr) -> Option<u128> {
        let value = match (ip, self.is_ipv6()) {
            (IpAddr::V4(a), false) => u128::from(u32::from(a)),
            (IpAddr::V6(a), true) => u128::from(a),
            _ => return None,
        };
        let offset = value.wrapping_sub(self.base());
        (value >= self.base() && offset < self.size()).then_some(offset)
    }

    fn overlaps(&self, other: &Cidr) -> bool {
        self.is_ipv6() == other.is_ipv6()
            && (self.offset_of(other.network).is_some() || other.offset_of(self.network).is_some())
    }

    /// The highest offset a pod may have: IPv4 keeps the broadcast address free.
    fn last_pod_offset(&self) -> u128 {
        let last = self.size().saturating_sub(1);
        if self.is_ipv6() {
            last
        } else {
            last.saturating_sub(1)
        }
    }

    /// Addresses a pod can get: the network address and the gateway (offset 1) are never
    /// handed out, nor IPv4's broadcast address.
    pub fn pod_addresses(&self) -> u128 {
        (self.last_pod_offset() + 1).saturating_sub(FIRST_POD_OFFSET)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The first address of a node's range a pod gets (.0 is the network, .1 the bridge).
const FIRST_POD_OFFSET: u128 = 2;

fn pow2(bits: u8) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        1u128 << bits
    }
}

fn address(ipv6: bool, value: u128) -> IpAddr {
    if ipv6 {
        IpAddr::V6(Ipv6Addr::from(value))
    } else {
        IpAddr::V4(Ipv4Addr::from(value as u32))
    }
}

/// `"10.128.0.0/9"` or dual-stack `"10.128.0.0/9,fd00:10::/48"`: one or two CIDRs, at most
/// one per family, in the order given (the first family is the primary one).
pub fn parse_cidrs(text: &str) -> Result<Vec<Cidr>, String> {
    let cidrs = text
        .split(',')
        .map(Cidr::parse)
        .collect::<Result<Vec<_>, _>>()?;
    match cidrs.as_slice() {
        [_] => Ok(cidrs),
        [a, b] if a.is_ipv6() != b.is_ipv6() => Ok(cidrs),
        [_, _] => Err(format!(
            "{text:?}: a dual-stack setting needs one IPv4 and one IPv6 CIDR"
        )),
        _ => Err(format!(
            "{text:?}: one CIDR, or two (one IPv4 and one IPv6) for dual-stack"
        )),
    }
}

/// The addressing settings as a config holds them (keys named as kube-controller-manager's
/// flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressingSettings<'a> {
    pub cluster_cidr: &'a str,
    /// Single-stack only, as `--node-cidr-mask-size`.
    pub node_cidr_mask_size: Option<u8>,
    pub node_cidr_mask_size_ipv4: Option<u8>,
    pub node_cidr_mask_size_ipv6: Option<u8>,
    pub node_ip_cidr: &'a str,
}

/// Every node's pod ranges and addresses, by cluster-wide node index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addressing {
    /// Each cluster CIDR with the mask of its per-node ranges and the key that set the mask,
    /// primary family first.
    pod_ranges: Vec<(Cidr, u8, &'static str)>,
    node_ranges: Vec<Cidr>,
}

impl Addressing {
    /// Checks `settings`; `prefix` goes before each key in errors (`nodes.` in a cluster config).
    pub fn new(settings: &AddressingSettings, prefix: &str) -> Result<Addressing, AddressingError> {
        let err = |key: &str, reason: String| AddressingError {
            key: format!("{prefix}{key}"),
            reason,
        };
        let cluster = parse_cidrs(settings.cluster_cidr).map_err(|r| err("cluster_cidr", r))?;
        let nodes = parse_cidrs(settings.node_ip_cidr).map_err(|r| err("node_ip_cidr", r))?;
        let dual = cluster.len() == 2;
        if settings.node_cidr_mask_size.is_some() {
            if dual {
                return Err(err(
                    "node_cidr_mask_size",
                    "not allowed with a dual-stack cluster_cidr; set node_cidr_mask_size_ipv4 and node_cidr_mask_size_ipv6".into(),
                ));
            }
            if settings.node_cidr_mask_size_ipv4.is_some()
                || settings.node_cidr_mask_size_ipv6.is_some()
            {
                return Err(err(
                    "node_cidr_mask_size",
                    "not allowed together with node_cidr_mask_size_ipv4 or node_cidr_mask_size_ipv6".into(),
                ));
            }
        }
        let mut pod_ranges = Vec::new();
        for cidr in cluster {
            let (key, family_mask, default, max) = if cidr.is_ipv6() {
                (
                    "node_cidr_mask_size_ipv6",
                    settings.node_cidr_mask_size_ipv6,
                    DEFAULT_NODE_MASK_IPV6,
                    126,
                )
            } else {
                (
                    "node_cidr_mask_size_ipv4",
                    settings.node_cidr_mask_size_ipv4,
                    DEFAULT_NODE_MASK_IPV4,
                    30,
                )
            };
            let (key, mask) = match settings.node_cidr_mask_size {
                Some(m) => ("node_cidr_mask_size", m),
                None => (key, family_mask.unwrap_or(default)),
            };
            if mask < cidr.prefix() || mask > max {
                return Err(err(
                    key,
                    format!(
                        "{mask} must lie between cluster_cidr {cidr}'s prefix length {} and {max} (a node needs at least one pod address)",
                        cidr.prefix()
                    ),
                ));
            }
            if let Some(n) = nodes.iter().find(|n| n.overlaps(&cidr)) {
                return Err(err(
                    "node_ip_cidr",
                    format!("{n} overlaps cluster_cidr {cidr}"),
                ));
            }
            pod_ranges.push((cidr, mask, key));
        }
        Ok(Addressing {
            pod_ranges,
            node_ranges: nodes,
        })
    }

    /// The defaults: `10.128.0.0/9` in /24s, node addresses from `100.64.0.0/10`.
    pub fn default_ipv4() -> Addressing {
        let default = Cidr::parse(DEFAULT_CLUSTER_CIDR).expect("a valid constant");
        Addressing {
            pod_ranges: vec![(default, DEFAULT_NODE_MASK_IPV4, "node_cidr_mask_size_ipv4")],
            node_ranges: vec![Cidr::parse(DEFAULT_NODE_IP_CIDR).expect("a valid constant")],
        }
    }

    /// Whether node indexes below `end` all get pod ranges and addresses, and whether each
    /// node's ranges hold `pods_per_node` pod IPs. `what` says what asks for them
    /// (`100000 nodes`); `prefix` as in [`Addressing::new`], `nodes_key` names the key of the
    /// node count.
    pub fn check(
        &self,
        end: u64,
        pods_per_node: u64,
        what: &str,
        prefix: &str,
        nodes_key: &str,
    ) -> Result<(), AddressingError> {
        for (cidr, mask, mask_key) in &self.pod_ranges {
            let holds = cidr.subnet_count(*mask);
            if u128::from(end) > holds {
                return Err(AddressingError {
                    key: nodes_key.into(),
                    reason: format!(
                        "{what} need {end} /{mask} ranges but {prefix}cluster_cidr {cidr} holds {holds}"
                    ),
                });
            }
            let per_node = cidr.subnet(*mask, 0).map_or(0, |r| r.pod_addresses());
            if u128::from(pods_per_node) > per_node {
                return Err(AddressingError {
                    key: format!("{prefix}pods"),
                    reason: format!(
                        "{pods_per_node} pods per node need {pods_per_node} addresses but a /{mask} node range ({prefix}{mask_key}) gives {per_node}"
                    ),
                });
            }
        }
        for cidr in &self.node_ranges {
            // Offset 0 is the network address; IPv4 keeps its broadcast address free too.
            let holds = cidr.last_pod_offset();
            if u128::from(end) > holds {
                return Err(AddressingError {
                    key: nodes_key.into(),
                    reason: format!(
                        "{what} need {end} node addresses but {prefix}node_ip_cidr {cidr} holds {holds}"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Node `index`'s pod ranges, primary family first (empty past the cluster CIDR's end,
    /// which [`Addressing::check`] rules out).
    pub fn pod_cidrs(&self, index: usize) -> Vec<Cidr> {
        self.pod_ranges
            .iter()
            .filter_map(|(cidr, mask, _)| cidr.subnet(*mask, index as u128))
            .collect()
    }

    /// Node `index`'s InternalIPs: the `index + 1`-th address of each node range.
    pub fn node_ips(&self, index: usize) -> Vec<IpAddr> {
        self.node_ranges
            .iter()
            .filter_map(|cidr| cidr.nth(index as u128 + 1))
            .collect()
    }
}

/// One node's pod IPs: offset `k` of every pod range at once (dual-stack pods get the same
/// offset in each family), the lowest free offset first. Memory grows with the pods running,
/// not with the range.
#[derive(Clone, Debug)]
pub struct PodIpPool {
    ranges: Vec<Cidr>,
    /// Bit `k` is offset `k`; bits 0 and 1 (network, gateway) are always set.
    used: Vec<u64>,
    /// The highest offset every range can hand out.
    last: u128,
}

impl PodIpPool {
    pub fn new(ranges: Vec<Cidr>) -> PodIpPool {
        let last = ranges.iter().map(Cidr::last_pod_offset).min().unwrap_or(0);
        PodIpPool {
            ranges,
            used: vec![0b11],
            last,
        }
    }

    /// A pod's IPs, one per range (primary first), or `None` when the ranges are full.
    pub fn allocate(&mut self) -> Option<Vec<IpAddr>> {
        let free_word = self.used.iter().position(|w| *w != u64::MAX);
        let word = free_word.unwrap_or(self.used.len());
        let bit = self.used.get(word).map_or(0, |w| w.trailing_ones());
        let offset = (word * 64) as u128 + u128::from(bit);
        if offset > self.last || self.ranges.is_empty() {
            return None;
        }
        if word == self.used.len() {
            self.used.push(0);
        }
        self.used[word] |= 1 << bit;
        self.ranges.iter().map(|r| r.nth(offset)).collect()
    }

    /// Gives back IPs [`PodIpPool::allocate`] handed out; others are ignored.
    pub fn release(&mut self, ips: &[IpAddr]) {
        let Some(offset) = ips
            .first()
            .and_then(|ip| self.ranges.first()?.offset_of(*ip))
        else {
            return;
        };
        if offset < FIRST_POD_OFFSET || offset > self.last {
            return;
        }
        let (word, bit) = ((offset / 64) as usize, offset % 64);
        if let Some(w) = self.used.get_mut(word) {
            *w &= !(1 << bit);
        }
        while self.used.len() > 1 && self.used.last() == Some(&0) {
            self.used.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(cluster: &str) -> AddressingSettings<'_> {
        AddressingSettings {
            cluster_cidr: cluster,
            node_cidr_mask_size: None,
            node_cidr_mask_size_ipv4: None,
            node_cidr_mask_size_ipv6: None,
            node_ip_cidr: DEFAULT_NODE_IP_CIDR,
        }
    }

    fn text(cidrs: Vec<Cidr>) -> Vec<String> {
        cidrs.iter().map(Cidr::to_string).collect()
    }

    #[test]
    fn defaults_keep_the_classic_layout() {
        let a = Addressing::new(&settings(DEFAULT_CLUSTER_CIDR), "").unwrap();
        assert_eq!(a, Addressing::default_ipv4());
        assert_eq!(text(a.pod_cidrs(0)), ["10.128.0.0/24"]);
        assert_eq!(text(a.pod_cidrs(300)), ["10.129.44.0/24"]);
        assert_eq!(text(a.pod_cidrs(32767)), ["10.255.255.0/24"]);
        assert!(a.pod_cidrs(32768).is_empty());
        assert_eq!(a.node_ips(0), [IpAddr::from([100, 64, 0, 1])]);
        assert_eq!(a.node_ips(300), [IpAddr::from([100, 64, 1, 45])]);
        a.check(32768, 110, "32768 nodes", "", "nodes").unwrap();
        let e = a.check(100_000, 110, "100000 nodes", "nodes.", "nodes.per_host");
        assert_eq!(
            e.unwrap_err().to_string(),
            "nodes.per_host: 100000 nodes need 100000 /24 ranges but nodes.cluster_cidr 10.128.0.0/9 holds 32768"
        );
    }

    #[test]
    fn a_wider_cluster_cidr_or_narrower_mask_holds_100000_nodes() {
        let mut s = settings("10.0.0.0/8");
        s.node_cidr_mask_size = Some(25);
        let a = Addressing::new(&s, "").unwrap();
        a.check(100_000, 110, "100000 nodes", "", "nodes").unwrap();
        assert_eq!(text(a.pod_cidrs(99_999)), ["10.195.79.128/25"]);
        let e = a.check(100_000, 126, "x", "", "nodes").unwrap_err();
        assert_eq!(e.key, "pods");
        assert!(e.reason.contains("gives 125"), "{e}");
        let a = Addressing::new(&settings("10.0.0.0/8"), "").unwrap();
        a.check(65_536, 253, "x", "", "nodes").unwrap();
        assert!(a.check(65_537, 1, "x", "", "nodes").is_err());
    }

    #[test]
    fn ipv6_single_stack() {
        let mut s = settings("fd00:10::/48");
        s.node_ip_cidr = "fd00:64::/64";
        let a = Addressing::new(&s, "").unwrap();
        assert_eq!(text(a.pod_cidrs(0)), ["fd00:10::/64"]);
        assert_eq!(text(a.pod_cidrs(0xffff)), ["fd00:10:0:ffff::/64"]);
        assert_eq!(
            a.node_ips(9),
            [IpAddr::from("fd00:64::a".parse::<Ipv6Addr>().unwrap())]
        );
        a.check(65_536, 110, "x", "", "nodes").unwrap();
        assert!(a.check(65_537, 110, "x", "", "nodes").is_err());
        s.node_cidr_mask_size = Some(120);
        let a = Addressing::new(&s, "").unwrap();
        assert_eq!(text(a.pod_cidrs(1)), ["fd00:10::100/120"]);
        a.check(1_000_000, 254, "x", "", "nodes").unwrap();
        assert!(a.check(1, 255, "x", "", "nodes").is_err());
    }

    #[test]
    fn dual_stack_keeps_the_given_order() {
        let mut s = settings("10.128.0.0/9,fd00:10::/48");
        s.node_ip_cidr = "100.64.0.0/10,fd00:64::/64";
        let a = Addressing::new(&s, "").unwrap();
        assert_eq!(text(a.pod_cidrs(1)), ["10.128.1.0/24", "fd00:10:0:1::/64"]);
        assert_eq!(a.node_ips(0).len(), 2);
        s.cluster_cidr = "fd00:10::/48,10.128.0.0/9";
        let a = Addressing::new(&s, "").unwrap();
        assert_eq!(text(a.pod_cidrs(1)), ["fd00:10:0:1::/64", "10.128.1.0/24"]);
        s.node_cidr_mask_size = Some(24);
        let e = Addressing::new(&s, "nodes.").unwrap_err();
        assert_eq!(e.key, "nodes.node_cidr_mask_size");
        s.node_cidr_mask_size = None;
        s.node_cidr_mask_size_ipv4 = Some(26);
        s.node_cidr_mask_size_ipv6 = Some(112);
        let a = Addressing::new(&s, "").unwrap();
        assert_eq!(
            text(a.pod_cidrs(2)),
            ["fd00:10::2:0/112", "10.128.0.128/26"]
        );
    }

    #[test]
    fn bad_settings_name_their_key() {
        let key = |s: AddressingSettings| Addressing::new(&s, "").unwrap_err().key;
        assert_eq!(key(settings("10.128.0.1/9")), "cluster_cidr");
        assert_eq!(key(settings("10.0.0.0/8,10.1.0.0/16")), "cluster_cidr");
        assert_eq!(key(settings("banana")), "cluster_cidr");
        let mut s = settings("10.128.0.0/9");
        s.node_cidr_mask_size = Some(8);
        assert_eq!(key(s.clone()), "node_cidr_mask_size");
        s.node_cidr_mask_size = Some(31);
        assert_eq!(key(s.clone()), "node_cidr_mask_size");
        s.node_cidr_mask_size = None;
        s.node_cidr_mask_size_ipv4 = Some(31);
        assert_eq!(key(s), "node_cidr_mask_size_ipv4");
        let mut s = settings("100.64.0.0/16");
        assert_eq!(key(s.clone()), "node_ip_cidr");
        s.cluster_cidr = "10.0.0.0/8";
        s.node_ip_cidr = "fd00::/64,fd01::/64";
        assert_eq!(key(s), "node_ip_cidr");
        let mut s = settings("10.0.0.0/8");
        s.node_cidr_mask_size = Some(30);
        let e = Addressing::new(&s, "")
            .unwrap()
            .check(1 << 22, 1, "4194304 nodes", "", "nodes")
            .unwrap_err();
        assert!(
            e.reason
                .contains("node_ip_cidr 100.64.0.0/10 holds 4194302"),
            "{e}"
        );
    }

    #[test]
    fn pod_ips_come_lowest_first_and_are_reused() {
        let range = Cidr::parse("10.64.0.0/24").unwrap();
        let mut pool = PodIpPool::new(vec![range]);
        let a = pool.allocate().unwrap();
        assert_eq!(a, [IpAddr::from([10, 64, 0, 2])]);
        let b = pool.allocate().unwrap();
        assert_eq!(b, [IpAddr::from([10, 64, 0, 3])]);
        pool.release(&a);
        assert_eq!(pool.allocate(), Some(a));
        let mut n = 3;
        while pool.allocate().is_some() {
            n += 1;
        }
        assert_eq!(n, 254, ".2 to .254 are handed out");
        pool.release(&[IpAddr::from([10, 64, 0, 77])]);
        assert_eq!(pool.allocate(), Some(vec![IpAddr::from([10, 64, 0, 77])]));
        pool.release(&[IpAddr::from([10, 64, 1, 7]), IpAddr::from([10, 64, 0, 0])]);
        assert_eq!(pool.allocate(), None);
    }

    #[test]
    fn dual_stack_pods_get_one_ip_per_family() {
        let v4 = Cidr::parse("10.64.0.0/30").unwrap();
        let v6 = Cidr::parse("fd00::/120").unwrap();
        let mut pool = PodIpPool::new(vec![v6, v4]);
        assert_eq!(
            pool.allocate().unwrap(),
            [
                IpAddr::from("fd00::2".parse::<Ipv6Addr>().unwrap()),
                IpAddr::from([10, 64, 0, 2])
            ]
        );
        assert_eq!(pool.allocate(), None, "the /30 holds one pod");
        let mut big = PodIpPool::new(vec![Cidr::parse("fd00::/64").unwrap()]);
        for _ in 0..1000 {
            big.allocate().unwrap();
        }
        assert_eq!(big.used.len(), 16, "memory follows the pods, not the range");
    }
}
