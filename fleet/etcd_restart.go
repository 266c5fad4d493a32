package fleet

import (
	"errors"
	"fmt"
	"time"
)

// RestartEtcd stops the cluster's etcd (SIGTERM, as when its static pod is restarted), keeps it
// down for down, and starts it again on the same client URL and data directory. kube-apiserver
// keeps running: its clients see errors while etcd is down, and its watches must resume after.
func (c *Cluster) RestartEtcd(down time.Duration) error {
	if c.env == nil || c.env.ControlPlane.Etcd == nil {
		return errors.New("cluster " + c.Name + " runs no etcd of its own")
	}
	etcd := c.env.ControlPlane.Etcd
	if err := etcd.Stop(); err != nil {
		return fmt.Errorf("stop %s etcd: %w", c.Name, err)
	}
	time.Sleep(down)
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("start %s etcd again on %s: %w", c.Name, etcd.URL, err)
	}
	return nil
}
