// SPDX-License-Identifier: GPL-2.0
/* C helpers for kernel macros and static inlines; see oxe_helpers.h. */

#include <linux/if_vlan.h>
#include <linux/namei.h>
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

bool oxe_is_vlan_dev(struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

unsigned int oxe_num_possible_cpus(void)
{
	return num_possible_cpus();
}

int oxe_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
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
