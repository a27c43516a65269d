// SPDX-License-Identifier: GPL-2.0
/* C helpers for kernel macros and static inlines; see oxe_helpers.h. */

#include <linux/crc32.h>
#include <linux/etherdevice.h>
#include <linux/sched/clock.h>
#include <linux/idr.h>
#include <linux/if_vlan.h>
#include <linux/namei.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/stat.h>
#include <linux/capability.h>
#include <net/netlink.h>
#include <linux/vmalloc.h>
#include <uapi/rdma/rdma_netlink.h>
#include "oxe_helpers.h"

struct ib_device *oxe_alloc_ib_device(size_t size)
{
	return _ib_alloc_device(size, &init_net);
}

void oxe_netdev_port_state(struct net_device *ndev, enum ib_port_state *state,
			   enum ib_port_phys_state *phys_state)
{
	*state = ib_get_curr_port_state(ndev);
	if (*state == IB_PORT_ACTIVE)
		*phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	else if (netif_get_flags(ndev) & IFF_UP)
		*phys_state = IB_PORT_PHYS_STATE_POLLING;
	else
		*phys_state = IB_PORT_PHYS_STATE_DISABLED;
}

void oxe_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

void oxe_local_bh_disable(void)
{
	local_bh_disable();
}

void oxe_local_bh_enable(void)
{
	local_bh_enable();
}

u32 oxe_crc32_le(u32 crc, const u8 *p, size_t len)
{
	return crc32_le(crc, p, len);
}

void oxe_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

unsigned int oxe_netdev_mtu(struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

bool oxe_netdev_mac(struct net_device *ndev, u8 mac[6])
{
	if (ndev->addr_len < ETH_ALEN || !ndev->dev_addr ||
	    is_zero_ether_addr(ndev->dev_addr))
		return false;
	memcpy(mac, ndev->dev_addr, ETH_ALEN);
	return true;
}

bool oxe_is_vlan_dev(struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

unsigned int oxe_num_possible_cpus(void)
{
	return num_possible_cpus();
}

unsigned int oxe_spread_cpu(unsigned int n)
{
	return cpumask_local_spread(n % num_online_cpus(), NUMA_NO_NODE);
}

/* Set while a CPU's copy helper waits there for another job (see
 * oxe_helper_work): the CPU is as good as idle, and awake. */
static DEFINE_PER_CPU(int, oxe_help_lingering);

#ifdef CONFIG_X86
/*
 * Whether `cpu` is idle (or only its helper lingers there), and whether it
 * runs a workqueue worker. idle_cpu() is not exported; x86 exports each
 * CPU's current task. A racy read is enough for a placement hint, and a
 * task seen running is freed only after an RCU grace period.
 */
static bool oxe_cpu_idle(int cpu, bool *worker)
{
	struct task_struct *t;
	bool idle;

	if (READ_ONCE(per_cpu(oxe_help_lingering, cpu))) {
		*worker = false;
		return true;
	}
	rcu_read_lock();
	t = READ_ONCE(per_cpu(current_task, cpu));
	idle = t && is_idle_task(t);
	*worker = !t || (READ_ONCE(t->flags) & PF_WQ_WORKER);
	rcu_read_unlock();
	return idle;
}
#endif

int oxe_idle_cpu_beside(bool busy_too, bool worker_too)
{
	int here, cpu, other = -1;

	if (!in_task())
		return -1;
	/* A worker alone on its CPU keeps what it queues there. */
	if (current->flags & PF_WQ_WORKER) {
		if (!worker_too || single_task_running())
			return -1;
		busy_too = false;
	}
	here = raw_smp_processor_id();
#ifdef CONFIG_X86
	for_each_cpu_wrap(cpu, cpu_online_mask, here + 1) {
		bool worker;

		if (cpu == here)
			continue;
		if (other < 0)
			other = cpu;
		if (oxe_cpu_idle(cpu, &worker))
			return cpu;
	}
	if (busy_too)
		return other;
#endif
	return -1;
}

int oxe_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

int oxe_udata_copy_in(struct ib_udata *udata, void *dst, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

int oxe_respond_empty_udata(struct ib_udata *udata)
{
	return ib_respond_empty_udata(udata);
}

bool oxe_module_loaded(const char *name)
{
	char buf[MODULE_NAME_LEN + 16];
	struct path path;

	snprintf(buf, sizeof(buf), "/sys/module/%s", name);
	if (kern_path(buf, 0, &path))
		return false;
	path_put(&path);
	return true;
}

int oxe_account_pinned(unsigned long npages, struct mm_struct **mmp)
{
	struct mm_struct *mm = current->mm;
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	u64 pinned;

	if (!mm)
		return -EFAULT;
	pinned = atomic64_add_return(npages, &mm->pinned_vm);
	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	*mmp = mm;
	return 0;
}

void oxe_unaccount_pinned(struct mm_struct *mm, unsigned long npages)
{
	atomic64_sub(npages, &mm->pinned_vm);
	mmdrop(mm);
}

/*
 * The frame of pages[0] in *pfn, and how many of the n pages from there on
 * have the frames that follow it: a whole THP in one call, not a call per
 * page (a 1 GiB THP registration spent 80% of its time page by page).
 */
unsigned long oxe_pages_run(struct page **pages, unsigned long n, unsigned long *pfn)
{
	unsigned long first = page_to_pfn(pages[0]), i;

	for (i = 1; i < n; i++)
		if (page_to_pfn(pages[i]) != first + i)
			break;
	*pfn = first;
	return i;
}

struct page *oxe_pfn_to_page(unsigned long pfn)
{
	return pfn_to_page(pfn);
}

void oxe_get_page(unsigned long pfn)
{
	get_page(pfn_to_page(pfn));
}

void oxe_put_page(unsigned long pfn)
{
	put_page(pfn_to_page(pfn));
}

long oxe_virt_to_pfn(u64 va)
{
	const void *p = (const void *)(uintptr_t)va;

	if (!virt_addr_valid(p))
		return -1;
	return page_to_pfn(virt_to_page(p));
}

void oxe_xa_init(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC);
}

/*
 * A key table's XArray (rust/keys.rs). Indices are handed out cyclically,
 * so with the usual reg/dereg churn each new index lands beyond the last:
 * erasing a freed slot would free its leaf (and, in a table left empty, the
 * whole tree) only for the next registration to allocate them again. A slot
 * freed in the block (leaf) of the last index handed out keeps a value
 * entry instead, which allocation skips and lookups take for empty; the
 * block is swept when allocation moves on. So the table holds at most a
 * leaf's worth of such entries, and its memory follows the live keys.
 *
 * cursor[0] is the next index to try, cursor[1] the number of times
 * allocation went around (the tag of the keys handed out), cursor[2] the
 * block of the last index handed out (U32_MAX: none). They change only
 * under the XArray's lock.
 */
#define OXE_XA_NO_BLOCK U32_MAX

static void oxe_xa_sweep(struct xarray *xa, u32 block)
{
	unsigned long first = (unsigned long)block * XA_CHUNK_SIZE;
	XA_STATE(xas, xa, first);
	void *entry;

	xas_for_each(&xas, entry, first + XA_CHUNK_SIZE - 1)
		if (xa_is_value(entry))
			xas_store(&xas, NULL);
}

/*
 * Reserves the first free index in [min, max] at or after cursor[0],
 * going around to min when none is left above. *round is the number of
 * times allocation went around, this time included. The slot reads as
 * empty until xa_store() fills it.
 */
int oxe_xa_reserve_cyclic(struct xarray *xa, u32 min, u32 max, u32 *cursor, u32 *id,
			  u32 *round)
{
	u32 block;
	int ret;

	xa_lock(xa);
	ret = __xa_alloc_cyclic(xa, id, NULL, XA_LIMIT(min, max), &cursor[0], GFP_KERNEL);
	if (ret == -EBUSY && cursor[2] != OXE_XA_NO_BLOCK) {
		/* Full but for the freed slots kept in the last block. */
		oxe_xa_sweep(xa, cursor[2]);
		cursor[2] = OXE_XA_NO_BLOCK;
		ret = __xa_alloc_cyclic(xa, id, NULL, XA_LIMIT(min, max), &cursor[0], GFP_KERNEL);
	}
	if (ret >= 0) {
		if (ret == 1)
			cursor[1]++;
		block = *id / XA_CHUNK_SIZE;
		if (block != cursor[2]) {
			if (cursor[2] != OXE_XA_NO_BLOCK)
				oxe_xa_sweep(xa, cursor[2]);
			cursor[2] = block;
		}
		ret = 0;
	}
	*round = cursor[1];
	xa_unlock(xa);
	return ret;
}

/* Frees the slot of a live entry: kept as a value entry in the last block. */
void oxe_xa_retire(struct xarray *xa, u32 id, const u32 *cursor)
{
	xa_lock(xa);
	if (id / XA_CHUNK_SIZE == cursor[2])
		/* Replacing an entry allocates nothing. */
		__xa_store(xa, id, xa_mk_value(0), 0);
	else
		__xa_erase(xa, id);
	xa_unlock(xa);
}

bool oxe_xa_is_value(const void *entry)
{
	return xa_is_value(entry);
}

int oxe_xa_err(void *entry)
{
	return xa_err(entry);
}

struct nlattr *oxe_nl_driver_nest_start(struct sk_buff *msg)
{
	return nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void oxe_nl_nest_end(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_end(msg, nest);
}

void oxe_nl_nest_cancel(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_cancel(msg, nest);
}

void *oxe_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

int oxe_remap_vmalloc(struct vm_area_struct *vma, void *addr)
{
	return remap_vmalloc_range(vma, addr, 0);
}

u64 oxe_vma_offset(struct vm_area_struct *vma)
{
	return (u64)vma->vm_pgoff << PAGE_SHIFT;
}

unsigned long oxe_vma_len(struct vm_area_struct *vma)
{
	return vma->vm_end - vma->vm_start;
}

void oxe_cq_comp_handler(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

void oxe_cq_event(struct ib_cq *cq, enum ib_event_type type)
{
	struct ib_event ev = { .device = cq->device, .element.cq = cq, .event = type };

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

void oxe_qp_event(struct ib_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = { .device = qp->device, .element.qp = qp, .event = type };

	if (qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
}

void oxe_srq_event(struct ib_srq *srq, enum ib_event_type type)
{
	struct ib_event ev = { .device = srq->device, .element.srq = srq, .event = type };

	if (srq->event_handler)
		srq->event_handler(&ev, srq->srq_context);
}

struct ib_ucontext *oxe_udata_ucontext(struct ib_udata *udata)
{
	if (!udata)
		return NULL;
	return container_of(udata, struct uverbs_attr_bundle, driver_udata)->context;
}

void oxe_vfree(void *addr)
{
	vfree(addr);
}

struct ib_udata *oxe_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

unsigned long oxe_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

bool oxe_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags)
{
	return spin_trylock_irqsave(lock, *flags);
}

void oxe_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

/* Empty once every PD is gone: an IDA frees its memory as ids are released. */
static DEFINE_IDA(oxe_pd_ids);

int oxe_pd_id_alloc(void)
{
	return ida_alloc(&oxe_pd_ids, GFP_KERNEL);
}

void oxe_pd_id_free(u32 id)
{
	ida_free(&oxe_pd_ids, id);
}

/* oxe's own workqueue for the QPs' send, receive and timer work (rxe has
 * rxe_wq): destroy_workqueue() at module exit drains it, so no work item
 * outlives the module. WQ_HIGHPRI (nice -20 workers): these tasks are the
 * device's engine, and the consumers that wait for them usually busy-poll
 * their CQ on the same CPUs; at normal priority a one-vCPU guest gave half
 * its time to perftest's polling loop and ib_write_bw between two guests
 * ran at 20-24 MB/s, with it at 33-39 MB/s. WQ_PERCPU (rxe's is unbound): a
 * task runs on the CPU that queued it, and one that a running task queues
 * (the peer's receive task, the ACK's send task) waits for the running
 * worker instead of waking another; loopback latencies went 19.1-19.4 ->
 * 12.3-12.8 us (write), 25.9-26.0 -> 19.0-19.5 (read), 17.8-18.4 -> 15.4-15.8
 * (send), bandwidth within its noise. Every task stops at its budget, so
 * none holds a CPU's pool for long. */
struct workqueue_struct *oxe_alloc_wq(void)
{
	/* WQ_MEM_RECLAIM: storage clients (nvme-rdma, nvmet-rdma) move their I/O
	 * through it on the reclaim path and flush it from their own reclaim
	 * workqueues when they destroy a QP. */
	return alloc_workqueue("oxe", WQ_PERCPU | WQ_HIGHPRI | WQ_MEM_RECLAIM, WQ_MAX_ACTIVE);
}

/* A turn of a QP task that has kept its CPU busy for yield_ms: at normal
 * priority it shares the CPU with the processes there (oxe_alloc_wq's
 * workers are nice -20). */
struct workqueue_struct *oxe_alloc_normal_wq(void)
{
	return alloc_workqueue("oxe_normal", WQ_PERCPU | WQ_MEM_RECLAIM, WQ_MAX_ACTIVE);
}

/* Jiffies for a timer of @ns, rounded up (as rxe's RNR timer). With
 * @never_early, one more: the tick under way when it is armed is partly gone,
 * and a retransmit timer that expires early spends a retry (timeout 14's
 * 67.1 ms, rounded down as rxe does, expired after 60 to 64 ms). */
unsigned long oxe_nsecs_to_jiffies(u64 ns, bool never_early)
{
	unsigned long j = nsecs_to_jiffies(ns + TICK_NSEC - 1);

	return never_early ? j + 1 : max(j, 1UL);
}

struct oxe_helper {
	struct work_struct work;
	struct oxe_help_job *job;
};

static DEFINE_PER_CPU(struct oxe_helper, oxe_helper);
static u64 oxe_help_linger_ns;
/* The QP whose turn runs on each CPU: whose copy a share is. */
static DEFINE_PER_CPU(unsigned long, oxe_turn_of);

void oxe_turn_starts(unsigned long qp)
{
	this_cpu_write(oxe_turn_of, qp);
}

unsigned long oxe_turn_now(void)
{
	return this_cpu_read(oxe_turn_of);
}

static void oxe_helper_take(struct oxe_helper *h)
{
	struct oxe_help_job *job = xchg(&h->job, NULL);

	/* Withdrawn before this ran: nothing to do. */
	if (job)
		job->run(job);
}

/*
 * Runs the job offered, then waits up to help_linger_us for the next one
 * before going back to sleep: a receive turn places packet after packet,
 * and a helper that must be woken for each starts late in each copy (about
 * 14 us under TCG, most of a 64 KiB copy). It waits only while nothing
 * else wants this CPU: a process it preempted (the poster) has it back at
 * once, and oxe work queued here stops it (oxe_help_kick), since a worker
 * that spins holds up its pool's other work. An offer that finds it
 * lingering does not queue it; the last look after oxe_help_lingering is cleared
 * (both sides fully ordered) takes a job offered meanwhile.
 */
static void oxe_helper_work(struct work_struct *work)
{
	struct oxe_helper *h = container_of(work, struct oxe_helper, work);
	u64 until;

	oxe_helper_take(h);
	if (!oxe_help_linger_ns)
		return;
	this_cpu_write(oxe_help_lingering, 1);
	smp_mb();
	until = local_clock() + oxe_help_linger_ns;
	while (this_cpu_read(oxe_help_lingering) && single_task_running() && !need_resched() &&
	       local_clock() < until) {
		if (READ_ONCE(h->job)) {
			oxe_helper_take(h);
			until = local_clock() + oxe_help_linger_ns;
		}
		cpu_relax();
	}
	this_cpu_write(oxe_help_lingering, 0);
	smp_mb();
	oxe_helper_take(h);
}

void oxe_help_init(u32 linger_us)
{
	int cpu;

	oxe_help_linger_ns = (u64)linger_us * NSEC_PER_USEC;
	for_each_possible_cpu(cpu)
		INIT_WORK(&per_cpu(oxe_helper, cpu).work, oxe_helper_work);
}

/*
 * Another online CPU that is idle (its helper lingering counts) or runs a
 * process (x86, oxe_cpu_idle's racy read), not a worker: a helper queued
 * behind a worker would start only when that one is done. Idle first; -1
 * if none, outside a task (the wire's softirq), or with interrupts off (a
 * fast MR's lock): the sharer may wait for the helper's last piece, and a
 * preempted helper whose preempter waits for an IPI to this CPU would
 * never finish it.
 */
int oxe_help_cpu(void)
{
	int here, cpu, busy = -1;

	if (!in_task() || irqs_disabled())
		return -1;
	here = raw_smp_processor_id();
#ifdef CONFIG_X86
	for_each_cpu_wrap(cpu, cpu_online_mask, here + 1) {
		bool worker;

		if (cpu == here)
			continue;
		if (oxe_cpu_idle(cpu, &worker))
			return cpu;
		if (!worker && busy < 0)
			busy = cpu;
	}
	return busy;
#else
	return -1;
#endif
}

/* Hands `job` to `cpu`'s helper; false if that helper holds another job. */
bool oxe_help_offer(struct workqueue_struct *wq, int cpu, struct oxe_help_job *job)
{
	struct oxe_helper *h = per_cpu_ptr(&oxe_helper, cpu);

	if (cmpxchg(&h->job, NULL, job))
		return false;
	/* Ordered after the cmpxchg: see oxe_helper_work. */
	if (!READ_ONCE(per_cpu(oxe_help_lingering, cpu)))
		queue_work_on(cpu, wq, &h->work);
	return true;
}

/* Work is queued on `cpu` (-1: this one): its lingering helper, which
 * would hold it up, stops. */
void oxe_help_kick(int cpu)
{
	int *l = cpu < 0 ? raw_cpu_ptr(&oxe_help_lingering) : per_cpu_ptr(&oxe_help_lingering, cpu);

	if (READ_ONCE(*l))
		WRITE_ONCE(*l, 0);
}

/* Takes `job` back; false if the helper has taken it (it runs or has run). */
bool oxe_help_withdraw(int cpu, struct oxe_help_job *job)
{
	return cmpxchg(&per_cpu_ptr(&oxe_helper, cpu)->job, job, NULL) == job;
}

/* /sys/class/infiniband/<dev>/parent: the net device's name, as rxe's. */
static ssize_t parent_show(struct device *device, struct device_attribute *attr, char *buf)
{
	struct net_device *ndev = ib_device_get_netdev(rdma_device_to_ibdev(device), 1);
	ssize_t n;

	if (!ndev)
		return -ENODEV;
	n = sysfs_emit(buf, "%s\n", ndev->name);
	dev_put(ndev);
	return n;
}

static DEVICE_ATTR_RO(parent);

static struct attribute *oxe_dev_attrs[] = {
	&dev_attr_parent.attr,
	NULL
};

static const struct attribute_group oxe_dev_group = {
	.attrs = oxe_dev_attrs,
};

const struct attribute_group *oxe_device_group(void)
{
	return &oxe_dev_group;
}
