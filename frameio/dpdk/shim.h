// The C side of package dpdk: the static inline parts of DPDK's fast path
// (rte_eth_rx_burst, rte_eth_tx_burst, rte_pktmbuf_alloc_bulk, mtod), put
// behind functions that each handle a whole burst, so Go makes one cgo call
// per burst and never one per packet.

#ifndef DGRAMIO_DPDK_SHIM_H
#define DGRAMIO_DPDK_SHIM_H

#include <stdint.h>
#include <stddef.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_bus.h>
#include <rte_version.h>

// dg_port is one queue of one port and the buffers of the Go side. Every
// array is allocated in C (dg_port_new) so that Go reads and writes it in
// place without cgo pointer checks.
struct dg_port {
	uint16_t port_id;
	uint16_t queue_id;
	struct rte_mempool *pool;
	uint16_t room;       // bytes a fresh mbuf holds from its data pointer

	// Receive. rx_held are the mbufs of the last burst, freed at the next
	// dg_rx or by dg_port_release; rx_data/rx_len describe them.
	uint16_t rx_cap;
	uint16_t rx_n;
	struct rte_mbuf **rx_held;
	uint8_t **rx_data;
	uint16_t *rx_len;
	int filter_own;      // drop frames whose source MAC is own_mac
	uint8_t own_mac[6];
	uint64_t rx_own;     // frames dropped by filter_own (our own, looped back)
	uint64_t rx_multiseg;// frames dropped for spanning several mbufs

	// Transmit. The Go side takes an mbuf from spare (refilled in bulk by
	// dg_tx_refill), copies a frame to spare_data[i], and moves it to
	// tx_pend with its length in tx_len; dg_tx_flush sends tx_pend.
	uint16_t tx_cap;
	uint16_t tx_n;
	struct rte_mbuf **tx_pend;
	uint16_t *tx_len;
	uint16_t spare_cap;
	uint16_t spare_n;
	struct rte_mbuf **spare;
	uint8_t **spare_data;
	uint64_t tx_wait_cycles; // how long dg_tx_flush retries a full ring
};

struct dg_port *dg_port_new(uint16_t port_id, uint16_t queue_id, struct rte_mempool *pool,
			    uint16_t rx_cap, uint16_t tx_cap, uint16_t spare_cap, uint64_t tx_wait_us);
void dg_port_release(struct dg_port *p);
void dg_port_free(struct dg_port *p);

uint16_t dg_rx(struct dg_port *p, uint16_t max);
uint16_t dg_tx_refill(struct dg_port *p);
uint16_t dg_tx_flush(struct dg_port *p);

// dg_conf and dg_result carry dg_port_configure's inputs and outputs.
struct dg_conf {
	uint16_t mtu;
	uint16_t rx_desc, tx_desc;
	int socket;
	struct rte_mempool *pool;    // the pool of queue 0 (and of all, without pools)
	uint16_t queues;             // RX/TX queue pairs; 0 means 1
	struct rte_mempool **pools;  // queues pools, one per RX queue, or NULL
	uint64_t rss_hf;             // hash types asked for with several queues
};

struct dg_result {
	const char *step;     // the call that failed
	int mtu_refused;      // rte_eth_dev_set_mtu refused (a warning)
	int mtu_errno;
	uint16_t mtu;         // the MTU the port has afterwards
	uint16_t rx_desc, tx_desc; // ring sizes after adjustment
	uint16_t max_mtu;
	uint16_t max_rx_queues, max_tx_queues; // the device's limits
	uint64_t rss_hf;      // hash types in use: asked for and offered (0: no RSS)
};

int dg_port_configure(uint16_t port, const struct dg_conf *c, struct dg_result *r);
int dg_link(uint16_t port, uint32_t *speed);
struct rte_mempool *dg_pool_create(const char *name, unsigned n, uint16_t data_room, int socket,
				   unsigned flags);
unsigned dg_pool_chunks(struct rte_mempool *mp);
int dg_rte_errno(void);
void dg_clear_errno(void);
const char *dg_pmd_dir(void);
int dg_eal_init(int argc, char **argv);

extern int dg_log_echo;
int dg_log_setup(void);
void dg_log_add(const char *buf, size_t size);
size_t dg_log_take(char *out, size_t n);

// xsklink.c
int dg_xsk_prog_attach(int ifindex, unsigned max_entries, int *link_fd, unsigned *prog_id,
		       const char **step);
void dg_bpf_log_setup(void);

#endif
