// SPDX-License-Identifier: GPL-2.0
/*
 * The RoCEv2 wire's contact with the networking stack: the UDP 4791 tunnel
 * sockets of each network namespace, and sk_buffs. These are the static
 * inlines and macros Rust cannot call (skb pushes, routes, ip_local_out); the
 * headers and the ICRC are built and checked by the Rust side, in the
 * buffers these functions hand it.
 */

#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <net/addrconf.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "oxe_helpers.h"

#define OXE_ROCE_V2_PORT 4791

/* Per network namespace: the tunnel sockets, opened with its first device. */
struct oxe_ns {
	struct mutex lock;
	unsigned int users;
	struct socket *sock4;
	struct socket *sock6;
};

static unsigned int oxe_net_id;

static int oxe_encap_recv(struct sock *sk, struct sk_buff *skb)
{
	struct net_device *ndev = skb->dev;
	struct ib_device *ibdev;

	ibdev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_RXE);
	if (!ibdev && is_vlan_dev(ndev))
		ibdev = ib_device_get_by_netdev(vlan_dev_real_dev(ndev),
						RDMA_DRIVER_RXE);
	if (!ibdev)
		goto drop;
	/* The parser reads one linear buffer, from the IP header on. */
	if (skb_linearize(skb)) {
		ib_device_put(ibdev);
		goto drop;
	}
	/* Takes the skb and the device reference. */
	oxe_net_rcv(ibdev, skb);
	return 0;
drop:
	kfree_skb(skb);
	return 0;
}

static struct socket *oxe_tunnel_open(struct net *net, bool ipv6)
{
	struct udp_port_cfg udp_cfg = {};
	struct udp_tunnel_sock_cfg tnl_cfg = {};
	struct socket *sock;
	int err;

	udp_cfg.family = ipv6 ? AF_INET6 : AF_INET;
	udp_cfg.ipv6_v6only = ipv6;
	udp_cfg.local_udp_port = htons(OXE_ROCE_V2_PORT);
	err = udp_sock_create(net, &udp_cfg, &sock);
	if (err < 0)
		return ERR_PTR(err);
	tnl_cfg.encap_type = 1;
	tnl_cfg.encap_rcv = oxe_encap_recv;
	setup_udp_tunnel_sock(net, sock->sk, &tnl_cfg);
	return sock;
}

static void oxe_tunnel_close(struct socket **sock)
{
	struct socket *s = *sock;

	if (s) {
		/* Senders read sock6 without the lock (oxe_skb_push_ip). */
		WRITE_ONCE(*sock, NULL);
		udp_tunnel_sock_release(s->sk);
	}
}

int oxe_net_get(struct net_device *ndev)
{
	struct oxe_ns *ns = net_generic(dev_net(ndev), oxe_net_id);
	struct socket *sock;
	int err = 0;

	mutex_lock(&ns->lock);
	if (ns->users++)
		goto out;
	sock = oxe_tunnel_open(dev_net(ndev), false);
	if (IS_ERR(sock)) {
		err = PTR_ERR(sock);
		ns->users--;
		goto out;
	}
	ns->sock4 = sock;
	if (IS_ENABLED(CONFIG_IPV6)) {
		sock = oxe_tunnel_open(dev_net(ndev), true);
		/* A kernel booted with ipv6.disable=1 has IPv4 only. */
		if (!IS_ERR(sock))
			WRITE_ONCE(ns->sock6, sock);
		else if (PTR_ERR(sock) != -EAFNOSUPPORT) {
			err = PTR_ERR(sock);
			oxe_tunnel_close(&ns->sock4);
			ns->users--;
		}
	}
out:
	mutex_unlock(&ns->lock);
	return err;
}

void oxe_net_put(struct net_device *ndev)
{
	struct oxe_ns *ns = net_generic(dev_net(ndev), oxe_net_id);

	mutex_lock(&ns->lock);
	if (!WARN_ON(!ns->users) && !--ns->users) {
		oxe_tunnel_close(&ns->sock4);
		oxe_tunnel_close(&ns->sock6);
	}
	mutex_unlock(&ns->lock);
}

static int __net_init oxe_ns_init(struct net *net)
{
	struct oxe_ns *ns = net_generic(net, oxe_net_id);

	mutex_init(&ns->lock);
	return 0;
}

/*
 * Runs after the namespace's netdevs are gone, and with them its oxe devices,
 * whose removal put the sockets: nothing should be left.
 */
static void __net_exit oxe_ns_exit(struct net *net)
{
	struct oxe_ns *ns = net_generic(net, oxe_net_id);

	WARN_ON(ns->users);
	oxe_tunnel_close(&ns->sock4);
	oxe_tunnel_close(&ns->sock6);
}

static struct pernet_operations oxe_net_ops = {
	.init = oxe_ns_init,
	.exit = oxe_ns_exit,
	.id = &oxe_net_id,
	.size = sizeof(struct oxe_ns),
};

int oxe_net_register(void)
{
	return register_pernet_subsys(&oxe_net_ops);
}

void oxe_net_unregister(void)
{
	unregister_pernet_subsys(&oxe_net_ops);
}

/* Room in front of the transport headers: link, IP and UDP headers. */
#define OXE_HEADROOM(ndev) \
	(LL_RESERVED_SPACE(ndev) + sizeof(struct ipv6hdr) + sizeof(struct udphdr))

struct sk_buff *oxe_skb_alloc(struct net_device *ndev, u32 len, u8 **data)
{
	struct sk_buff *skb;

	skb = alloc_skb(OXE_HEADROOM(ndev) + len, GFP_KERNEL);
	if (!skb)
		return NULL;
	skb_reserve(skb, OXE_HEADROOM(ndev));
	*data = skb_put(skb, len);
	return skb;
}

void oxe_skb_consume(struct sk_buff *skb)
{
	consume_skb(skb);
}

const u8 *oxe_skb_network(struct sk_buff *skb, u32 *len)
{
	*len = skb_tail_pointer(skb) - skb_network_header(skb);
	return skb_network_header(skb);
}

static void oxe_push_udp(struct sk_buff *skb, u16 sport)
{
	struct udphdr *uh;

	__skb_push(skb, sizeof(*uh));
	skb_reset_transport_header(skb);
	uh = udp_hdr(skb);
	uh->source = htons(sport);
	uh->dest = htons(OXE_ROCE_V2_PORT);
	uh->len = htons(skb->len);
	/* RoCEv2 sends a zero UDP checksum; the ICRC covers the packet. */
	uh->check = 0;
}

int oxe_gid_attr_ifindex(const struct ib_gid_attr *attr)
{
	struct net_device *ndev;
	int ifindex = 0;

	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (!IS_ERR(ndev))
		ifindex = ndev->ifindex;
	rcu_read_unlock();
	return ifindex;
}

u16 oxe_skb_vlan_id(const struct sk_buff *skb)
{
	return skb->dev && is_vlan_dev(skb->dev) ? vlan_dev_vlan_id(skb->dev) : 0xffff;
}

bool oxe_netdev_port_down(struct net_device *ndev)
{
	return ib_get_curr_port_state(ndev) == IB_PORT_DOWN;
}

bool oxe_gid_attr_is_local(const struct ib_gid_attr *attr, const u8 gid[16])
{
	const struct ib_gid_attr *found;

	found = rdma_find_gid_by_port(attr->device, (const union ib_gid *)gid,
				      IB_GID_TYPE_ROCE_UDP_ENCAP, attr->port_num, NULL);
	if (IS_ERR(found))
		return false;
	rdma_put_gid_attr(found);
	return true;
}

bool oxe_qp_gid_is(struct ib_qp *qp, u32 index, const u8 gid[16])
{
	union ib_gid now;

	return !rdma_query_gid(qp->device, 1, index, &now) &&
	       !memcmp(now.raw, gid, sizeof(now.raw));
}

bool oxe_skb_to_gid_of(struct ib_device *ibdev, const struct sk_buff *skb,
		       const u8 gid[16])
{
	const struct ib_gid_attr *attr;

	if (rdma_is_multicast_addr((struct in6_addr *)gid))
		return true;
	attr = rdma_find_gid_by_port(ibdev, (const union ib_gid *)gid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP, 1, skb->dev);
	if (IS_ERR(attr))
		return false;
	rdma_put_gid_attr(attr);
	return true;
}

int oxe_skb_push_ip(struct sk_buff *skb, struct net_device *ndev, int oif,
		    bool ipv6, const u8 saddr[16], const u8 daddr[16], u16 sport,
		    u8 tclass, u8 ttl, int id)
{
	struct net *net = dev_net(ndev);
	struct dst_entry *dst;

	skb->dev = ndev;
	oxe_push_udp(skb, sport);
	if (!ipv6) {
		struct flowi4 fl = {};
		struct rtable *rt;
		struct iphdr *iph;

		/* The GID's device: a VLAN's packets go out tagged, through it. */
		fl.flowi4_oif = oif ? oif : ndev->ifindex;
		memcpy(&fl.saddr, saddr + 12, 4);
		memcpy(&fl.daddr, daddr + 12, 4);
		fl.flowi4_proto = IPPROTO_UDP;
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		/* A train's member goes the way of its first. */
		if (id < 0) {
			rt = ip_route_output_key(net, &fl);
			if (IS_ERR(rt))
				return -EHOSTUNREACH;
			skb_dst_set(skb, &rt->dst);
		}
		skb_push(skb, sizeof(*iph));
		skb_reset_network_header(skb);
		iph = ip_hdr(skb);
		iph->version = IPVERSION;
		iph->ihl = sizeof(*iph) >> 2;
		iph->tot_len = htons(skb->len);
		iph->frag_off = htons(IP_DF);
		iph->protocol = IPPROTO_UDP;
		iph->tos = tclass;
		iph->ttl = ttl;
		memcpy(&iph->saddr, saddr + 12, 4);
		memcpy(&iph->daddr, daddr + 12, 4);
		/*
		 * A train's packets take consecutive IDs from its first, as
		 * its segmentation writes them (the ICRC covers the ID); the
		 * first reserves a train's worth.
		 */
		if (id < 0)
			__ip_select_ident(net, iph, OXE_TRAIN_MAX);
		else
			iph->id = htons(id);
		skb->protocol = htons(ETH_P_IP);
		return 0;
	}
#if IS_ENABLED(CONFIG_IPV6)
	{
		struct flowi6 fl6 = {};
		struct ipv6hdr *ip6h;
		struct oxe_ns *ns = net_generic(net, oxe_net_id);

		/*
		 * The socket only says IPv6 is up: it may be released under
		 * us (its netdev unregistering), so the lookup goes without it.
		 */
		if (!READ_ONCE(ns->sock6))
			return -EAFNOSUPPORT;
		fl6.flowi6_oif = oif ? oif : ndev->ifindex;
		memcpy(&fl6.saddr, saddr, 16);
		memcpy(&fl6.daddr, daddr, 16);
		fl6.flowi6_proto = IPPROTO_UDP;
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
		if (id < 0) {
			dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
			if (IS_ERR(dst))
				return -EHOSTUNREACH;
			if (dst->error) {
				dst_release(dst);
				return -EHOSTUNREACH;
			}
			skb_dst_set(skb, dst);
		}
		__skb_push(skb, sizeof(*ip6h));
		skb_reset_network_header(skb);
		ip6h = ipv6_hdr(skb);
		ip6_flow_hdr(ip6h, tclass, htonl(0));
		ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
		ip6h->nexthdr = IPPROTO_UDP;
		ip6h->hop_limit = ttl;
		memcpy(&ip6h->saddr, saddr, 16);
		memcpy(&ip6h->daddr, daddr, 16);
		skb->protocol = htons(ETH_P_IPV6);
		return 0;
	}
#else
	return -EAFNOSUPPORT;
#endif
}

int oxe_skb_send(struct sk_buff *skb)
{
	struct net *net = dev_net(skb_dst(skb)->dev);
	int err;

	if (skb->protocol == htons(ETH_P_IP))
		err = ip_local_out(net, NULL, skb);
	else
		err = ip6_local_out(net, NULL, skb);
	return net_xmit_eval(err);
}

/*
 * A train: packets of one route behind a first one, sent by one call as a
 * UDP GSO skb whose segments are the packets themselves (SKB_GSO_FRAGLIST:
 * each keeps its own headers and ICRC; the segmentation only renumbers the
 * IPv4 IDs, from the first's, and sets the lengths back). A device without
 * that offload (any real NIC, virtio-net) gets the segments as one list, so
 * that it notifies the host once per train (xmit_more) instead of once per
 * packet.
 */
void oxe_skb_train_add(struct sk_buff *first, struct sk_buff **last,
		       struct sk_buff *skb)
{
	if (*last)
		(*last)->next = skb;
	else
		skb_shinfo(first)->frag_list = skb;
	*last = skb;
	first->len += skb->len;
	first->data_len += skb->len;
	first->truesize += skb->truesize;
}

/*
 * A device that would pass a train on whole (veth, lo: they advertise the
 * fraglist offload) gets its packets one by one, as any receiver expects
 * them; each shares the first's route.
 */
static int oxe_skb_train_unchain(struct sk_buff *first)
{
	struct sk_buff *skb = skb_shinfo(first)->frag_list, *next;
	struct dst_entry *dst = skb_dst(first);
	int err, ret;

	skb_shinfo(first)->frag_list = NULL;
	for (next = skb; next; next = next->next) {
		first->truesize -= next->truesize;
		skb_dst_set(next, dst_clone(dst));
	}
	first->len -= first->data_len;
	first->data_len = 0;
	ret = oxe_skb_send(first);
	for (; skb; skb = next) {
		next = skb->next;
		skb_mark_not_on_list(skb);
		err = oxe_skb_send(skb);
		if (!ret)
			ret = err;
	}
	return ret;
}

int oxe_skb_train_send(struct sk_buff *first, u16 npkts)
{
	if (npkts > 1 && (skb_dst(first)->dev->features & NETIF_F_GSO_FRAGLIST))
		return oxe_skb_train_unchain(first);
	if (npkts > 1) {
		struct skb_shared_info *sh = skb_shinfo(first);

		sh->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
		sh->gso_size = skb_headlen(first) - skb_transport_offset(first) -
			       sizeof(struct udphdr);
		sh->gso_segs = npkts;
		/* As GRO leaves a train; the segmentation sets it back. */
		udp_hdr(first)->len = htons(first->len - skb_transport_offset(first));
		/* The UDP checksum stays zero: no checksum to offload. */
		first->ip_summed = CHECKSUM_UNNECESSARY;
	}
	return oxe_skb_send(first);
}

/* rdma_rxe's names where they mean the same (rxe_hw_counters.c); the order is rust/stats.rs's. */
static const struct rdma_stat_desc oxe_stat_descs[] = {
	{ .name = "sent_pkts" },
	{ .name = "rcvd_pkts" },
	{ .name = "duplicate_request" },
	{ .name = "out_of_seq_request" },
	{ .name = "rcvd_rnr_err" },
	{ .name = "send_rnr_err" },
	{ .name = "rcvd_seq_err" },
	{ .name = "retry_exceeded_err" },
	{ .name = "retry_rnr_exceeded_err" },
	{ .name = "completer_retry_err" },
	{ .name = "send_err" },
	{ .name = "sent_bytes" },
	{ .name = "rcvd_bytes" },
	{ .name = "icrc_err" },
	{ .name = "rcv_drops" },
	{ .name = "qkey_violations" },
	{ .name = "link_downed" },
};

/* Counter @i's name, for a QP's own counters in `rdma res show qp -dd`;
 * NULL past the last. */
const char *oxe_stat_name(unsigned int i)
{
	return i < ARRAY_SIZE(oxe_stat_descs) ? oxe_stat_descs[i].name : NULL;
}

struct rdma_hw_stats *oxe_alloc_stats(int num)
{
	if (num != ARRAY_SIZE(oxe_stat_descs))
		return NULL;
	return rdma_alloc_hw_stats_struct(oxe_stat_descs, num,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

/*
 * Lets @ndev take (or stop taking) the Ethernet multicast address of group
 * @mgid (IPv4-mapped for IPv4), as rxe programs it on attach and detach.
 */
int oxe_netdev_mcast(struct net_device *ndev, const u8 mgid[16], bool add)
{
	unsigned char mac[ETH_ALEN];

	if (ipv6_addr_v4mapped((const struct in6_addr *)mgid))
		ip_eth_mc_map(*(const __be32 *)(mgid + 12), mac);
	else
		ipv6_eth_mc_map((const struct in6_addr *)mgid, mac);
	return add ? dev_mc_add(ndev, mac) : dev_mc_del(ndev, mac);
}

int oxe_stats_set(struct rdma_hw_stats *stats, int i, u64 v)
{
	if (i < 0 || i >= stats->num_counters)
		return -EINVAL;
	stats->value[i] = v;
	return 0;
}
