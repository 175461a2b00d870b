// Package framequeue holds what the kinds over frames (xdp, dpdk,
// tcp-xdp, tcp-dpdk) do alike to a device before their loop owns it: the
// capture of Config.Pcap and the claim of a queue's CPU. It is apart from
// package queues so that a program of the socket kinds links no capture
// code.
package framequeue

import (
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/pcapio"
	"github.com/dgramio/dgramio/internal/cpu"
)

// Capture is how the kinds over frames (xdp, dpdk, tcp-xdp, tcp-dpdk)
// honour dgramio.Config.Pcap: with pcap set, dev is wrapped in a pcapio
// capture of every frame (pcapio.Wrap) and mode, the Stats.Mode of dev,
// gets " +pcap"; with pcap empty both come back as they are. On error dev
// is left open, as pcapio.Wrap leaves it.
func Capture(dev frameio.FrameIO, pcap, mode string) (frameio.FrameIO, string, error) {
	fio, err := pcapio.Wrap(dev, pcap)
	if err != nil {
		return nil, "", err
	}
	if pcap != "" {
		mode += " +pcap"
	}
	return fio, mode, nil
}

// ClaimQueue readies queue device dev of a group for the goroutine that
// opens the queue and polls it: that goroutine's thread is claimed for
// cpus (cpu.Claim, without locking when cpus is empty), and dev goes
// through Capture. The returned Thread is the caller's to release with
// the queue. On error dev is closed and the thread released.
func ClaimQueue(dev frameio.FrameIO, cpus []int, pcap, mode string) (frameio.FrameIO, cpu.Thread, string, error) {
	th, err := cpu.Claim(cpus, false)
	if err != nil {
		dev.Close()
		return nil, cpu.Thread{}, "", err
	}
	fio, mode, err := Capture(dev, pcap, mode)
	if err != nil {
		dev.Close()
		th.Release()
		return nil, cpu.Thread{}, "", err
	}
	return fio, th, mode, nil
}
