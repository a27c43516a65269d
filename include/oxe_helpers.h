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
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_netlink.h>
#include <uapi/rdma/ib_user_verbs.h>
#include <uapi/rdma/rdma_user_rxe.h>

/* ib_alloc_device() is a macro around _ib_alloc_device(). */
struct ib_device *oxe_alloc_ib_device(size_t size);

/* State and physical state of the port bound to @ndev, as rdma_rxe reports them. */
void oxe_netdev_port_state(struct net_device *ndev, enum ib_port_state *state,
			   enum ib_port_phys_state *phys_state);
void oxe_dev_put(struct net_device *ndev);
bool oxe_is_vlan_dev(struct net_device *ndev);
unsigned int oxe_num_possible_cpus(void);

int oxe_udata_in_empty(struct ib_udata *udata);
int oxe_respond_empty_udata(struct ib_udata *udata);

/* True if the module @name is loaded (find_module() is not exported). */
bool oxe_module_loaded(const char *name);

#endif
