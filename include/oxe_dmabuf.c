// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf MRs: memory another driver exports, reached by the CPU through
 * the exporter's vmap (oxe copies with the CPU and has no DMA device to
 * attach with). Exporters that pin their buffers for good (udmabuf, and the
 * others without a pin op); a dynamic exporter may move its buffer, which
 * would need move_notify: refused. The rest is in rust/mr/dmabuf.rs.
 */

#include <linux/dma-buf.h>
#include <linux/iosys-map.h>
#include <linux/vmalloc.h>
#include "oxe_helpers.h"

MODULE_IMPORT_NS("DMA_BUF");

struct dma_buf *oxe_dmabuf_map(int fd, u64 offset, u64 length, u64 *vaddr)
{
	struct dma_buf *db = dma_buf_get(fd);
	struct iosys_map map;
	int ret;

	if (IS_ERR(db))
		return db;
	ret = -EINVAL;
	if (offset > db->size || length > db->size - offset)
		goto put;
	ret = -EOPNOTSUPP;
	if (dma_buf_is_dynamic(db) || !db->ops->vmap)
		goto put;
	ret = dma_buf_vmap_unlocked(db, &map);
	if (ret)
		goto put;
	if (map.is_iomem) {
		dma_buf_vunmap_unlocked(db, &map);
		ret = -EOPNOTSUPP;
		goto put;
	}
	*vaddr = (u64)(uintptr_t)map.vaddr;
	return db;
put:
	dma_buf_put(db);
	return ERR_PTR(ret);
}

void oxe_dmabuf_unmap(struct dma_buf *db, u64 vaddr)
{
	struct iosys_map map = IOSYS_MAP_INIT_VADDR((void *)(uintptr_t)vaddr);

	dma_buf_vunmap_unlocked(db, &map);
	dma_buf_put(db);
}

long oxe_vmalloc_to_pfn(u64 va)
{
	void *p = (void *)(uintptr_t)va;

	return is_vmalloc_or_module_addr(p) ? (long)vmalloc_to_pfn(p) : -1;
}
