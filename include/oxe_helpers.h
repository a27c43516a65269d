/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bindgen input for oxe, and the C helpers that stand in for kernel macros and
 * static inlines Rust cannot call.
 */
#ifndef OXE_HELPERS_H
#define OXE_HELPERS_H

#include <linux/netdevice.h>
#include <linux/module.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>
#include <linux/xarray.h>
#include <linux/mm.h>
#include <uapi/rdma/ib_user_verbs.h>
#include <uapi/rdma/rdma_user_rxe.h>

/* ib_alloc_device() is a macro around _ib_alloc_device(). */
struct ib_device *oxe_alloc_ib_device(size_t size);

/* State and physical state of the port bound to @ndev, as rdma_rxe reports them. */
void oxe_netdev_port_state(struct net_device *ndev, enum ib_port_state *state,
			   enum ib_port_phys_state *phys_state);
void oxe_dev_put(struct net_device *ndev);
void oxe_dev_hold(struct net_device *ndev);
void oxe_local_bh_disable(void);
void oxe_local_bh_enable(void);
/* The kernel's CRC-32 (accelerated where the CPU can), for the ICRC. */
u32 oxe_crc32_le(u32 crc, const u8 *p, size_t len);
/* net_device is opaque to Rust (kernel::bindings has no fields for it). */
unsigned int oxe_netdev_mtu(struct net_device *ndev);
/* Copies the MAC into @mac; false if the netdev has none (or all zeros, as lo). */
bool oxe_netdev_mac(struct net_device *ndev, u8 mac[6]);
bool oxe_is_vlan_dev(struct net_device *ndev);
unsigned int oxe_num_possible_cpus(void);
/* The @n-th online CPU, counting around. */
unsigned int oxe_spread_cpu(unsigned int n);
/*
 * From a process's system call, an online CPU other than this one that is
 * idle now, or with @busy_too the first other one if none is; -1 if none
 * (or not known: only x86 tells), or if called from an interrupt. From a
 * worker, with @worker_too, an idle one if another task waits for this CPU
 * (a process the worker preempted); -1 otherwise.
 */
int oxe_idle_cpu_beside(bool busy_too, bool worker_too);

int oxe_udata_in_empty(struct ib_udata *udata);
int oxe_udata_copy_in(struct ib_udata *udata, void *dst, size_t len);
int oxe_respond_empty_udata(struct ib_udata *udata);

/*
 * Pinned-page accounting against RLIMIT_MEMLOCK, as the core's umem does:
 * adds @npages to current->mm->pinned_vm (unless over the limit without
 * CAP_IPC_LOCK: -ENOMEM) and returns the mm, grabbed, in @mmp.
 */
int oxe_account_pinned(unsigned long npages, struct mm_struct **mmp);
void oxe_unaccount_pinned(struct mm_struct *mm, unsigned long npages);

unsigned long oxe_pages_run(struct page **pages, unsigned long n, unsigned long *pfn);
struct page *oxe_pfn_to_page(unsigned long pfn);
void oxe_get_page(unsigned long pfn);
void oxe_put_page(unsigned long pfn);
/*
 * The frame behind a kernel virtual address of the linear map (the "DMA
 * address" of a device using virtual DMA), or -1 if @va is not one.
 */
long oxe_virt_to_pfn(u64 va);

/*
 * On-demand paging (oxe_odp.c), through the core's ib_umem_odp, opaque here.
 * oxe_odp_lock returns 0 with [va, va + len) present (writable if @write)
 * and the umem locked, faulting pages in if @fault; -EAGAIN if some are
 * missing and !@fault; else -errno.
 * oxe_odp_pfn: under the lock, the frame of the present page at @va.
 */
struct ib_umem_odp;
bool oxe_odp_enabled(void);

/*
 * dma-buf MRs (oxe_dmabuf.c): the buffer behind @fd, vmapped, [offset,
 * offset + length) checked inside it; ERR_PTR on failure. The mapping's
 * kernel address in *@vaddr.
 */
struct dma_buf;
struct dma_buf *oxe_dmabuf_map(int fd, u64 offset, u64 length, u64 *vaddr);
void oxe_dmabuf_unmap(struct dma_buf *db, u64 vaddr);
/* The frame behind a vmalloc (or vm_map_ram) address, or -1. */
long oxe_vmalloc_to_pfn(u64 va);
void oxe_odp_release(struct ib_umem_odp *odp);
/* Implicit ODP: the root (ERR_PTR on failure), its children, the top of user space. */
struct ib_umem_odp *oxe_odp_implicit(struct ib_device *dev, int access);
void oxe_odp_release_implicit(struct ib_umem_odp *root);
struct ib_umem_odp *oxe_odp_child(struct ib_umem_odp *root, u64 addr, u64 size);
u64 oxe_task_size_max(void);
int oxe_odp_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault);
void oxe_odp_unlock(struct ib_umem_odp *odp);
unsigned long oxe_odp_pfn(struct ib_umem_odp *odp, u64 va);

/* xarray static inlines: an allocating XArray, cyclic reservation, errors. */
void oxe_xa_init(struct xarray *xa);
int oxe_xa_reserve_cyclic(struct xarray *xa, u32 min, u32 max, u32 *cursor, u32 *id,
			  u32 *round);
void oxe_xa_retire(struct xarray *xa, u32 id, const u32 *cursor);
bool oxe_xa_is_value(const void *entry);
int oxe_xa_err(void *entry);

/* Rings shared with user space: vmalloc_user memory, mapped by mmap. */
void *oxe_vmalloc_user(unsigned long size);
int oxe_remap_vmalloc(struct vm_area_struct *vma, void *addr);
u64 oxe_vma_offset(struct vm_area_struct *vma);
unsigned long oxe_vma_len(struct vm_area_struct *vma);

void oxe_vfree(void *addr);
/* The driver udata of a uverbs attribute bundle (NULL for kernel callers). */
struct ib_udata *oxe_attrs_udata(struct uverbs_attr_bundle *attrs);

/* The ucontext of a uverbs command (rdma_udata_to_drv_context). */
struct ib_ucontext *oxe_udata_ucontext(struct ib_udata *udata);

/* Completion callbacks and async events of CQs and QPs. */
void oxe_cq_comp_handler(struct ib_cq *cq);
void oxe_cq_event(struct ib_cq *cq, enum ib_event_type type);
void oxe_qp_event(struct ib_qp *qp, enum ib_event_type type);
void oxe_srq_event(struct ib_srq *srq, enum ib_event_type type);
struct workqueue_struct *oxe_alloc_wq(void);
struct workqueue_struct *oxe_alloc_normal_wq(void);
unsigned long oxe_nsecs_to_jiffies(u64 ns, bool never_early);

/*
 * A helper per CPU on oxe's queue, to share a large copy with another CPU:
 * the caller offers a job, works on it, and takes it back if the helper has
 * not started it (then the helper finds nothing). `run` is called on the
 * helper's CPU with the job.
 */
struct oxe_help_job;
struct oxe_help_job {
	void (*run)(struct oxe_help_job *job);
};
void oxe_help_init(u32 linger_us);
void oxe_help_kick(int cpu);
/* A QP's turn starts on this CPU (the QP's address), and which it is. */
void oxe_turn_starts(unsigned long qp);
unsigned long oxe_turn_now(void);
int oxe_help_cpu(void);
bool oxe_help_offer(struct workqueue_struct *wq, int cpu, struct oxe_help_job *job);
bool oxe_help_withdraw(int cpu, struct oxe_help_job *job);

/* Driver attributes of `rdma res show`: a RDMA_NLDEV_ATTR_DRIVER nest. */
struct nlattr *oxe_nl_driver_nest_start(struct sk_buff *msg);
void oxe_nl_nest_end(struct sk_buff *msg, struct nlattr *nest);
void oxe_nl_nest_cancel(struct sk_buff *msg, struct nlattr *nest);

/* spin_lock_irqsave and friends are macros. */
unsigned long oxe_spin_lock_irqsave(spinlock_t *lock);
bool oxe_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags);
void oxe_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);

/*
 * PD identities: small integers, unique among live PDs, so that a PD and a set
 * of rights fit in one atomic word. Returns the id or a negative errno.
 */
int oxe_pd_id_alloc(void);
void oxe_pd_id_free(u32 id);

/*
 * The RoCEv2 wire (oxe_net.c): the UDP 4791 tunnel sockets of a network
 * namespace, held by each oxe device of it (the first opens them, the last
 * closes them), and the sk_buff operations of sending and receiving.
 */
int oxe_net_register(void);
void oxe_net_unregister(void);
int oxe_net_get(struct net_device *ndev);
void oxe_net_put(struct net_device *ndev);
/* An skb with room for the link, IP and UDP headers and @len bytes at @data. */
struct sk_buff *oxe_skb_alloc(struct net_device *ndev, u32 len, u8 **data);
void oxe_skb_consume(struct sk_buff *skb);
/* The linear bytes from the IP header to the end. */
const u8 *oxe_skb_network(struct sk_buff *skb, u32 *len);
/*
 * Routes the packet out of interface @oif (0: @ndev) and pushes its UDP and
 * IP headers (IPv4 addresses are the last 4 bytes of the 16): 0,
 * -EHOSTUNREACH or -EAFNOSUPPORT. With @id >= 0 it is a train's member (see
 * oxe_skb_train_add): not routed, and @id is its IPv4 ID; else an ID is
 * chosen for it.
 */
int oxe_skb_push_ip(struct sk_buff *skb, struct net_device *ndev, int oif,
		    bool ipv6, const u8 saddr[16], const u8 daddr[16], u16 sport,
		    u8 tclass, u8 ttl, int id);
/*
 * The interface index of the net device a GID belongs to (a VLAN device's
 * own, not its real device's); 0 once it is gone.
 */
int oxe_gid_attr_ifindex(const struct ib_gid_attr *attr);
/* The port of a device on @ndev is down (ib_get_curr_port_state). */
bool oxe_netdev_port_down(struct net_device *ndev);
/* The device's sysfs attributes (ib_device_ops.device_group): `parent`. */
const struct attribute_group *oxe_device_group(void);
/*
 * Whether @gid is a RoCEv2 GID of the device @attr (a source GID) belongs
 * to, on any of its net devices: a destination there is this device.
 */
bool oxe_gid_attr_is_local(const struct ib_gid_attr *attr, const u8 gid[16]);
/*
 * Whether GID @index of port 1 of @qp's device is still @gid: false once it
 * was deleted or replaced (rxe_init_packet's rdma_get_gid_attr).
 */
bool oxe_qp_gid_is(struct ib_qp *qp, u32 index, const u8 gid[16]);
/* The VLAN a received packet came in on (its device's), or 0xffff. */
u16 oxe_skb_vlan_id(const struct sk_buff *skb);
/*
 * Whether @gid (a packet's destination) is a multicast address or a RoCEv2
 * GID of @ibdev on the net device the packet came in on (rxe_chk_dgid).
 */
bool oxe_skb_to_gid_of(struct ib_device *ibdev, const struct sk_buff *skb,
		       const u8 gid[16]);
/* Sends a packet made by oxe_skb_push_ip (consumes it). */
int oxe_skb_send(struct sk_buff *skb);
/* Packets a train may carry (see oxe_skb_train_add). */
#define OXE_TRAIN_MAX 32
/* Chains @skb (routed, with its ICRC) behind @first; @last is the train's end. */
void oxe_skb_train_add(struct sk_buff *first, struct sk_buff **last,
		       struct sk_buff *skb);
/* Sends @first and the @npkts - 1 packets behind it (consumes them). */
int oxe_skb_train_send(struct sk_buff *first, u16 npkts);
/* hw counters: the descriptions of @num counters (NULL if not oxe's count), one value. */
struct rdma_hw_stats *oxe_alloc_stats(int num);
const char *oxe_stat_name(unsigned int i);
int oxe_netdev_mcast(struct net_device *ndev, const u8 mgid[16], bool add);
int oxe_stats_set(struct rdma_hw_stats *stats, int i, u64 v);
/* In Rust: a received packet, with a reference on its device; takes both. */
void oxe_net_rcv(struct ib_device *ibdev, struct sk_buff *skb);

/* True if the module @name is loaded (find_module() is not exported). */
bool oxe_module_loaded(const char *name);

/* Tracepoints (oxe_trace.h): each fires its event when it is enabled. */
void oxe_trace_mr_reg(u32 lkey, u32 rkey, u64 iova, u64 length, u32 access, u64 pinned,
		      const char *kind);
void oxe_trace_mr_dereg(u32 lkey, u64 pinned);
void oxe_trace_qp_state(u32 qpn, int from, int to);
void oxe_trace_retransmit(u32 qpn, u32 psn, const char *why, u32 tries);
void oxe_trace_read_pace(u32 qpn, u32 psn, u32 rate);
void oxe_trace_drop(u32 qpn, u32 psn, const char *why);
void oxe_trace_cqe_error(u32 qpn, u64 wr_id, u32 status, u32 opcode);

#endif
