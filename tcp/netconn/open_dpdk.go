//go:build dpdk

package netconn

import (
	"errors"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/dpdk"
	"github.com/dgramio/dgramio/internal/tcp"
)

// OpenDPDK is the Opener of kind tcp-dpdk: the DPDK port of cfg
// (cfg.DPDK.PCI, cfg.DPDK.VDev, or a net_af_xdp vdev on cfg.Iface; package
// frameio/dpdk), as tcp.NewDPDK opens it, without pinning (the Service pins
// its poller to cfg.CPUs[0]). On a net_af_packet vdev, where the kernel
// sees every segment, a cfg.LocalIP that the kernel also holds on the
// interface is refused with a *dgramio.ConfigError (the kernel would reset
// our connections). Built only with the build tag dpdk; run it on a thread
// inside the interface's network namespace. Opened.Mode names the engine
// of cfg.TCP.Stack. DPDK cannot sleep on a vdev's queue: the Service's
// idle poller naps instead (see PollMode).
func OpenDPDK(cfg dgramio.Config) (Opened, error) {
	port, err := dpdk.Open(dpdk.OptionsFrom(cfg))
	if err != nil {
		return Opened{}, err
	}
	info := port.Info()
	if err := tcp.CheckDPDKAddr(info, cfg.LocalIP); err != nil {
		return Opened{}, errors.Join(err, port.Close())
	}
	engine := "netstack"
	if cfg.TCP.Stack == "" || cfg.TCP.Stack == dgramio.TCPStackNative {
		engine = "native"
	}
	return Opened{FIO: port, Mode: engine + " over dpdk " + info.Driver, Close: port.Close}, nil
}
