//go:build dpdk

// The XDP program of net_af_xdp, attached through a BPF link that this
// process owns (see xsklink.go), and the routing of libbpf's and libxdp's
// messages into DPDK's log.

#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "shim.h"

// dg_xsk_prog_attach loads libxdp's default AF_XDP program
// (xsk_def_xdp_prog.o, found where libxdp itself looks for it), with an
// XSKMAP of at least max_entries entries, and attaches it to ifindex
// through a BPF link (Linux >= 5.9). On success *link_fd is the link's
// descriptor, which the caller owns (closing it detaches the program), and
// *prog_id the program's id; the program's and map's own descriptors are
// closed again (the link holds the program, the program its maps). It
// returns 0 or a negative errno, and *step names the step that failed.
//
// The object is opened under a name of its own, so that libbpf names its
// data map "dgramio_.data" and not "xsk_def_.data": libxdp then finds no
// reference count in the program it adopts, and so never detaches it.
int dg_xsk_prog_attach(int ifindex, unsigned max_entries, int *link_fd, unsigned *prog_id,
		       const char **step)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "dgramio_xsk");
	struct xdp_program *xp;
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	struct bpf_link *link;
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int ret;

	*link_fd = -1;
	*prog_id = 0;
	*step = "find xsk_def_xdp_prog.o";
	xp = xdp_program__find_file("xsk_def_xdp_prog.o", NULL, &opts);
	ret = (int)libxdp_get_error(xp);
	if (ret != 0)
		return ret < 0 ? ret : -ret;
	obj = xdp_program__bpf_obj(xp);
	*step = "find xsks_map and xsk_def_prog in xsk_def_xdp_prog.o";
	map = bpf_object__find_map_by_name(obj, "xsks_map");
	prog = bpf_object__find_program_by_name(obj, "xsk_def_prog");
	if (map == NULL || prog == NULL) {
		ret = -ENOENT;
		goto out;
	}
	if (max_entries > bpf_map__max_entries(map)) {
		*step = "size xsks_map";
		ret = bpf_map__set_max_entries(map, max_entries);
		if (ret != 0)
			goto out;
	}
	*step = "load xsk_def_prog";
	ret = bpf_object__load(obj);
	if (ret != 0)
		goto out;
	*step = "attach xsk_def_prog through a BPF link";
	link = bpf_program__attach_xdp(prog, ifindex);
	if (link == NULL) {
		ret = -errno;
		goto out;
	}
	// The descriptor stays open and becomes the caller's: disconnected,
	// bpf_link__destroy frees only libbpf's record of it.
	*link_fd = bpf_link__fd(link);
	bpf_link__disconnect(link);
	bpf_link__destroy(link);
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
		*prog_id = info.id;
	ret = 0;
out:
	xdp_program__close(xp);
	return ret;
}

// libbpf and libxdp print their messages to stderr by default; these hooks
// put their warnings into DPDK's log instead (kept for error messages,
// echoed unless the EAL is quiet), and drop their informational and debug
// messages, as the EAL's --log-level=warning does DPDK's.

static void dg_log_vprintf(const char *format, va_list args)
{
	char buf[512];
	int n = vsnprintf(buf, sizeof(buf), format, args);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	// libxdp says this of every program it adopts without a reference
	// count, which is what dg_xsk_prog_attach arranges on purpose.
	if (strstr(buf, "doesn't support program refcnt") != NULL)
		return;
	dg_log_add(buf, (size_t)n);
}

static int dg_libbpf_print(enum libbpf_print_level level, const char *format, va_list args)
{
	if (level == LIBBPF_WARN)
		dg_log_vprintf(format, args);
	return 0;
}

static int dg_libxdp_print(enum libxdp_print_level level, const char *format, va_list args)
{
	if (level == LIBXDP_WARN)
		dg_log_vprintf(format, args);
	return 0;
}

void dg_bpf_log_setup(void)
{
	libbpf_set_print(dg_libbpf_print);
	libxdp_set_print(dg_libxdp_print);
}
