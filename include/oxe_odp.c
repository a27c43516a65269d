// SPDX-License-Identifier: GPL-2.0
/*
 * On-demand paging through the core's ib_umem_odp: the mmu_interval_notifier
 * callback and the page-list walk, which need struct ib_umem_odp's fields,
 * HMM's flag bits and the notifier's sequence helpers (static inlines Rust
 * cannot call). The rest of ODP is in rust/mr/odp.rs.
 */

#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <rdma/ib_umem_odp.h>
#include "oxe_helpers.h"

bool oxe_odp_enabled(void)
{
	return IS_ENABLED(CONFIG_INFINIBAND_ON_DEMAND_PAGING);
}

#ifdef CONFIG_INFINIBAND_ON_DEMAND_PAGING

/*
 * The mm takes pages away (munmap, migration, reclaim, a THP split, fork's
 * write protection): forget them, under the lock every access of the data
 * path holds, so that no copy is in progress and the next one faults again.
 */
static bool oxe_odp_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	struct ib_umem_odp *odp = container_of(mni, struct ib_umem_odp, notifier);
	unsigned long start, end;

	if (!mmu_notifier_range_blockable(range))
		return false;

	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	start = max_t(u64, ib_umem_start(odp), range->start);
	end = min_t(u64, ib_umem_end(odp), range->end);
	if (start < end)
		ib_umem_odp_unmap_dma_pages(odp, start, end);
	mutex_unlock(&odp->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops oxe_odp_ops = {
	.invalidate = oxe_odp_invalidate,
};

void oxe_odp_release(struct ib_umem_odp *odp)
{
	ib_umem_odp_release(odp);
}

/*
 * Implicit ODP: a root with no range, whose children the data path makes
 * for the chunks it touches (in a QP's task, where current->mm is not the
 * process's: the children take the root's mm). The root holds the mm_struct
 * (mmgrab, not the address space) so that a child made after the process
 * exited finds it and fails cleanly.
 */
struct ib_umem_odp *oxe_odp_implicit(struct ib_device *dev, int access)
{
	struct ib_umem_odp *root;

	root = ib_umem_odp_alloc_implicit(dev, access & ~IB_ACCESS_HUGETLB);
	if (!IS_ERR(root))
		mmgrab(root->umem.owning_mm);
	return root;
}

void oxe_odp_release_implicit(struct ib_umem_odp *root)
{
	struct mm_struct *mm = root->umem.owning_mm;

	ib_umem_odp_release(root);
	mmdrop(mm);
}

struct ib_umem_odp *oxe_odp_child(struct ib_umem_odp *root, u64 addr, u64 size)
{
	return ib_umem_odp_alloc_child(root, addr, size, &oxe_odp_ops);
}

u64 oxe_task_size_max(void)
{
	return TASK_SIZE_MAX;
}

static bool oxe_odp_in(struct ib_umem_odp *odp, u64 va, u64 len)
{
	return va >= ib_umem_start(odp) && len <= ib_umem_end(odp) - va;
}

/*
 * Under the lock, with [va, va + len) present and writable: the caller is
 * about to write it through the kernel's mapping, which leaves the user PTE
 * clean, and the core marks dirty only pages it DMA-mapped, which a
 * software device never does. Unmarked, reclaim could drop what a WRITE or
 * a RECV put in a clean swap-cache or file page. (Marked here, where the
 * entries are known good, not in the notifier, which may meet an entry a
 * failing fault is about to clear.)
 */
static void oxe_odp_dirty(struct ib_umem_odp *odp, u64 va, u64 len)
{
	u64 first = (va - ib_umem_start(odp)) >> PAGE_SHIFT;
	u64 last = (va + len - 1 - ib_umem_start(odp)) >> PAGE_SHIFT;
	u64 i;

	for (i = first; i <= last; i++)
		set_page_dirty(compound_head(hmm_pfn_to_page(odp->map.pfn_list[i])));
}

/* Under the lock: every page of [va, va + len) mapped (writable if @write). */
static bool oxe_odp_present(struct ib_umem_odp *odp, u64 va, u64 len, bool write)
{
	unsigned long need = HMM_PFN_VALID | (write ? HMM_PFN_WRITE : 0);
	u64 first = (va - ib_umem_start(odp)) >> PAGE_SHIFT;
	u64 last = (va + len - 1 - ib_umem_start(odp)) >> PAGE_SHIFT;
	u64 i;

	for (i = first; i <= last; i++)
		if ((odp->map.pfn_list[i] & need) != need)
			return false;
	return true;
}

int oxe_odp_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault)
{
	int ret;

	if (!len)
		len = 1;
	if (!oxe_odp_in(odp, va, len))
		return -EFAULT;
	if (write && !odp->umem.writable)
		return -EACCES;
	mutex_lock(&odp->umem_mutex);
	if (oxe_odp_present(odp, va, len, write)) {
		if (write)
			oxe_odp_dirty(odp, va, len);
		return 0;
	}
	mutex_unlock(&odp->umem_mutex);
	if (!fault)
		return -EAGAIN;
	/*
	 * Faults the range in (hmm_range_fault), retrying while the notifier
	 * invalidates it meanwhile, and returns with the lock held and the
	 * pages present. An address no longer mapped, or mapped read-only for
	 * a write, is an error (-EFAULT, -EPERM).
	 */
	ret = ib_umem_odp_map_dma_and_lock(odp, va, len,
					   write ? HMM_PFN_WRITE : 0, true);
	if (ret < 0) {
		/*
		 * hmm_range_fault() fills pfn_list without the lock and, when
		 * it fails part way (a page unmapped, or read-only for a
		 * write), nothing checks the notifier's sequence: an entry it
		 * read before an invalidation and stored after it would stay
		 * VALID for a page the mm has freed, and the next access would
		 * use it. Forget the range; no access reads it meanwhile (the
		 * MR's chunk lock serialises them with this fault).
		 */
		mutex_lock(&odp->umem_mutex);
		ib_umem_odp_unmap_dma_pages(odp, ALIGN_DOWN(va, BIT(odp->page_shift)),
					    ALIGN(va + len, BIT(odp->page_shift)));
		mutex_unlock(&odp->umem_mutex);
		return ret;
	}
	if (!oxe_odp_present(odp, va, len, write)) {
		mutex_unlock(&odp->umem_mutex);
		return -EFAULT;
	}
	if (write)
		oxe_odp_dirty(odp, va, len);
	return 0;
}

void oxe_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

unsigned long oxe_odp_pfn(struct ib_umem_odp *odp, u64 va)
{
	u64 i = (va - ib_umem_start(odp)) >> PAGE_SHIFT;

	lockdep_assert_held(&odp->umem_mutex);
	return odp->map.pfn_list[i] & ~HMM_PFN_FLAGS;
}

#else /* !CONFIG_INFINIBAND_ON_DEMAND_PAGING: reg_mr refuses ON_DEMAND first */

void oxe_odp_release(struct ib_umem_odp *odp) {}

struct ib_umem_odp *oxe_odp_implicit(struct ib_device *dev, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

void oxe_odp_release_implicit(struct ib_umem_odp *root) {}

struct ib_umem_odp *oxe_odp_child(struct ib_umem_odp *root, u64 addr, u64 size)
{
	return ERR_PTR(-EOPNOTSUPP);
}

u64 oxe_task_size_max(void)
{
	return 0;
}

int oxe_odp_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault)
{
	return -EOPNOTSUPP;
}

void oxe_odp_unlock(struct ib_umem_odp *odp) {}

unsigned long oxe_odp_pfn(struct ib_umem_odp *odp, u64 va)
{
	return 0;
}

#endif
