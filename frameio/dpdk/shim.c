//go:build dpdk

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "shim.h"

struct dg_port *dg_port_new(uint16_t port_id, uint16_t queue_id, struct rte_mempool *pool,
			    uint16_t rx_cap, uint16_t tx_cap, uint16_t spare_cap, uint64_t tx_wait_us)
{
	struct dg_port *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->port_id = port_id;
	p->queue_id = queue_id;
	p->pool = pool;
	p->room = rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;
	p->rx_cap = rx_cap;
	p->tx_cap = tx_cap;
	p->spare_cap = spare_cap;
	p->tx_wait_cycles = tx_wait_us * (rte_get_timer_hz() / 1000000);
	p->rx_held = calloc(rx_cap, sizeof(*p->rx_held));
	p->rx_data = calloc(rx_cap, sizeof(*p->rx_data));
	p->rx_len = calloc(rx_cap, sizeof(*p->rx_len));
	p->tx_pend = calloc(tx_cap, sizeof(*p->tx_pend));
	p->tx_len = calloc(tx_cap, sizeof(*p->tx_len));
	p->spare = calloc(spare_cap, sizeof(*p->spare));
	p->spare_data = calloc(spare_cap, sizeof(*p->spare_data));
	if (!p->rx_held || !p->rx_data || !p->rx_len || !p->tx_pend || !p->tx_len ||
	    !p->spare || !p->spare_data) {
		dg_port_free(p);
		return NULL;
	}
	return p;
}

// dg_port_release gives every mbuf the Go side holds back to the pool.
void dg_port_release(struct dg_port *p)
{
	if (p->rx_n) {
		rte_pktmbuf_free_bulk(p->rx_held, p->rx_n);
		p->rx_n = 0;
	}
	if (p->tx_n) {
		rte_pktmbuf_free_bulk(p->tx_pend, p->tx_n);
		p->tx_n = 0;
	}
	if (p->spare_n) {
		rte_pktmbuf_free_bulk(p->spare, p->spare_n);
		p->spare_n = 0;
	}
}

void dg_port_free(struct dg_port *p)
{
	free(p->rx_held);
	free(p->rx_data);
	free(p->rx_len);
	free(p->tx_pend);
	free(p->tx_len);
	free(p->spare);
	free(p->spare_data);
	free(p);
}

// dg_rx frees the mbufs of the previous burst, takes up to max new frames,
// drops those that are not one whole frame in one mbuf and, with
// filter_own, those we sent ourselves (a packet socket sees its outgoing
// frames), and describes the rest in rx_data/rx_len.
uint16_t dg_rx(struct dg_port *p, uint16_t max)
{
	if (p->rx_n) {
		rte_pktmbuf_free_bulk(p->rx_held, p->rx_n);
		p->rx_n = 0;
	}
	if (max > p->rx_cap)
		max = p->rx_cap;
	if (max == 0)
		return 0;
	uint16_t n = rte_eth_rx_burst(p->port_id, p->queue_id, p->rx_held, max);
	uint16_t k = 0;
	uint64_t own = 0, multi = 0;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = p->rx_held[i];
		if (m->nb_segs != 1) {
			multi++;
			rte_pktmbuf_free(m);
			continue;
		}
		uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
		if (p->filter_own && m->data_len >= 12 && memcmp(d + 6, p->own_mac, 6) == 0) {
			own++;
			rte_pktmbuf_free(m);
			continue;
		}
		p->rx_held[k] = m;
		p->rx_data[k] = d;
		p->rx_len[k] = m->data_len;
		k++;
	}
	if (own)
		__atomic_fetch_add(&p->rx_own, own, __ATOMIC_RELAXED);
	if (multi)
		__atomic_fetch_add(&p->rx_multiseg, multi, __ATOMIC_RELAXED);
	p->rx_n = k;
	return k;
}

// dg_tx_refill fills spare with fresh mbufs, in one bulk allocation when
// the pool has enough, else as many single ones as it has. It returns
// spare_n.
uint16_t dg_tx_refill(struct dg_port *p)
{
	uint16_t have = p->spare_n;
	uint16_t want = p->spare_cap - have;
	if (want == 0)
		return have;
	if (rte_pktmbuf_alloc_bulk(p->pool, p->spare + have, want) == 0) {
		have += want;
	} else {
		while (have < p->spare_cap) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
			if (m == NULL)
				break;
			p->spare[have++] = m;
		}
	}
	for (uint16_t i = p->spare_n; i < have; i++)
		p->spare_data[i] = rte_pktmbuf_mtod(p->spare[i], uint8_t *);
	p->spare_n = have;
	return have;
}

// dg_tx_flush sets the lengths of the pending mbufs and bursts them. When
// the ring takes nothing, it retries until tx_wait_cycles have passed since
// the first refusal, then frees what is left (the caller counts it as
// dropped). It returns how many the device took.
uint16_t dg_tx_flush(struct dg_port *p)
{
	uint16_t n = p->tx_n;
	if (n == 0)
		return 0;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = p->tx_pend[i];
		m->data_len = p->tx_len[i];
		m->pkt_len = p->tx_len[i];
	}
	uint16_t sent = 0;
	uint64_t deadline = 0;
	while (sent < n) {
		uint16_t k = rte_eth_tx_burst(p->port_id, p->queue_id, p->tx_pend + sent, n - sent);
		sent += k;
		if (sent == n || k != 0)
			continue;
		uint64_t now = rte_get_timer_cycles();
		if (deadline == 0)
			deadline = now + p->tx_wait_cycles;
		else if (now >= deadline)
			break;
		rte_pause();
	}
	if (sent < n)
		rte_pktmbuf_free_bulk(p->tx_pend + sent, n - sent);
	p->tx_n = 0;
	return sent;
}

// dg_port_configure configures c->queues RX and TX queue pairs (one by
// default; several with RSS where the device offers it) without offloads
// (checksums are done in software), with the MTU dance: the MTU goes into
// rte_eth_dev_configure, and for a jumbo MTU rte_eth_dev_set_mtu is tried
// too, its refusal only a warning (some PMDs take the MTU from configure and
// refuse the second call, others need it). Ring sizes are clamped to the
// device's limits. Then the port is started. On error r->step names the
// call; the caller closes the port.
int dg_port_configure(uint16_t port, const struct dg_conf *c, struct dg_result *r)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	int ret;

	memset(r, 0, sizeof(*r));
	rte_errno = 0; // a -1 below is then -EPERM, not a stale rte_errno
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0) {
		r->step = "rte_eth_dev_info_get";
		return ret;
	}
	r->max_mtu = info.max_mtu;
	r->max_rx_queues = info.max_rx_queues;
	r->max_tx_queues = info.max_tx_queues;
	uint16_t nq = c->queues ? c->queues : 1;
	if (nq > info.max_rx_queues || nq > info.max_tx_queues) {
		r->step = "queue count";
		return -EINVAL;
	}
	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = c->mtu;
	if (nq > 1) {
		// RSS over the queues, on the hash types the device offers of
		// those asked for; none offered (a vdev) leaves the spreading to
		// whatever feeds the queues (the kernel, for net_af_xdp).
		uint64_t hf = c->rss_hf & info.flow_type_rss_offloads;
		if (hf != 0) {
			conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			conf.rx_adv_conf.rss_conf.rss_key = NULL; // the device's key
			conf.rx_adv_conf.rss_conf.rss_hf = hf;
		}
		r->rss_hf = hf;
	}
	ret = rte_eth_dev_configure(port, nq, nq, &conf);
	if (ret != 0) {
		r->step = "rte_eth_dev_configure";
		return ret;
	}
	if (c->mtu > RTE_ETHER_MTU) {
		int m = rte_eth_dev_set_mtu(port, c->mtu);
		if (m != 0) {
			r->mtu_refused = 1;
			r->mtu_errno = -m;
		}
	}
	uint16_t rxd = c->rx_desc, txd = c->tx_desc;
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (ret != 0) {
		r->step = "rte_eth_dev_adjust_nb_rx_tx_desc";
		return ret;
	}
	r->rx_desc = rxd;
	r->tx_desc = txd;
	for (uint16_t q = 0; q < nq; q++) {
		struct rte_mempool *mp = c->pools ? c->pools[q] : c->pool;
		ret = rte_eth_rx_queue_setup(port, q, rxd, c->socket, NULL, mp);
		if (ret != 0) {
			r->step = "rte_eth_rx_queue_setup";
			return ret;
		}
		ret = rte_eth_tx_queue_setup(port, q, txd, c->socket, NULL);
		if (ret != 0) {
			r->step = "rte_eth_tx_queue_setup";
			return ret;
		}
	}
	ret = rte_eth_dev_start(port);
	if (ret != 0) {
		r->step = "rte_eth_dev_start";
		return ret;
	}
	uint16_t mtu = 0;
	if (rte_eth_dev_get_mtu(port, &mtu) == 0)
		r->mtu = mtu;
	else
		r->mtu = c->mtu;
	return 0;
}

// dg_link returns 1 when the port's link is up, 0 when down, or a negative
// errno; *speed is in Mbit/s.
int dg_link(uint16_t port, uint32_t *speed)
{
	struct rte_eth_link link;
	memset(&link, 0, sizeof(link));
	int ret = rte_eth_link_get_nowait(port, &link);
	if (ret != 0)
		return ret;
	*speed = link.link_speed;
	return link.link_status == RTE_ETH_LINK_UP;
}

// dg_pool_create is rte_pktmbuf_pool_create with mempool flags. A vdev's
// pool (no device DMA) is made with RTE_MEMPOOL_F_NO_IOVA_CONTIG, so that
// without hugepages its objects lie back to back instead of one per 4 KiB
// page: net_af_xdp registers the pool as its UMEM assuming exactly that
// (base + populated_size * object size), and with the page-per-object
// layout the objects past that range make invalid descriptors, which the
// kernel drops without a word (transmission stops after a few thousand
// frames).
struct rte_mempool *dg_pool_create(const char *name, unsigned n, uint16_t data_room, int socket,
				   unsigned flags)
{
	struct rte_pktmbuf_pool_private priv = {
		.mbuf_data_room_size = data_room,
		.mbuf_priv_size = 0,
	};
	unsigned elt = sizeof(struct rte_mbuf) + (unsigned)data_room;
	struct rte_mempool *mp = rte_mempool_create_empty(name, n, elt, 0, sizeof(priv), socket, flags);
	if (mp == NULL)
		return NULL;
	int ret = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (ret != 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_pktmbuf_pool_init(mp, &priv);
	ret = rte_mempool_populate_default(mp);
	if (ret < 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

unsigned dg_pool_chunks(struct rte_mempool *mp) { return mp->nb_mem_chunks; }

int dg_rte_errno(void) { return rte_errno; }

void dg_clear_errno(void) { rte_errno = 0; }

const char *dg_pmd_dir(void) { return RTE_EAL_PMD_PATH; }

int dg_eal_init(int argc, char **argv) { return rte_eal_init(argc, argv); }

// The log of DPDK goes through dg_log_write (and libbpf's and libxdp's
// warnings through dg_log_add, see xsklink.c): the last few kilobytes are
// kept for error messages (a failed probe says why only in the log), and
// each message is echoed to stderr when dg_log_echo is set.

static pthread_mutex_t dg_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char dg_log_buf[8192];
static size_t dg_log_len;
int dg_log_echo = 1;

// dg_log_add keeps a message in the log (and echoes it when dg_log_echo is
// set).
void dg_log_add(const char *buf, size_t size)
{
	pthread_mutex_lock(&dg_log_mu);
	size_t n = size;
	const char *src = buf;
	if (n > sizeof(dg_log_buf)) {
		src += n - sizeof(dg_log_buf);
		n = sizeof(dg_log_buf);
	}
	if (dg_log_len + n > sizeof(dg_log_buf)) {
		size_t drop = dg_log_len + n - sizeof(dg_log_buf);
		memmove(dg_log_buf, dg_log_buf + drop, dg_log_len - drop);
		dg_log_len -= drop;
	}
	memcpy(dg_log_buf + dg_log_len, src, n);
	dg_log_len += n;
	pthread_mutex_unlock(&dg_log_mu);
	if (dg_log_echo)
		fwrite(buf, 1, size, stderr);
}

static ssize_t dg_log_write(void *cookie, const char *buf, size_t size)
{
	(void)cookie;
	dg_log_add(buf, size);
	return size;
}

int dg_log_setup(void)
{
	cookie_io_functions_t io = {.write = dg_log_write};
	FILE *f = fopencookie(NULL, "w", io);
	if (f == NULL)
		return -1;
	setvbuf(f, NULL, _IOLBF, 0);
	dg_bpf_log_setup();
	return rte_openlog_stream(f);
}

// dg_log_take copies what was logged since the last call into out (at most
// n bytes, the newest) and forgets it; it returns the length.
size_t dg_log_take(char *out, size_t n)
{
	pthread_mutex_lock(&dg_log_mu);
	size_t k = dg_log_len < n ? dg_log_len : n;
	memcpy(out, dg_log_buf + dg_log_len - k, k);
	dg_log_len = 0;
	pthread_mutex_unlock(&dg_log_mu);
	return k;
}
