package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// nodeUnstage calls the CSI driver directly, as an operator acting on a
// NeedsDriver plan action would.
func nodeUnstage(t *testing.T, volumeID, stagingPath string) {
	t.Helper()
	callDriver(t, "NodeUnstageVolume "+volumeID+" "+stagingPath, func(ctx context.Context, c csi.NodeClient) error {
		_, err := c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: volumeID, StagingTargetPath: stagingPath})
		return err
	})
}

// nodeUnpublish calls the CSI driver directly, as the kubelet does: to
// reproduce by hand a kubelet that died between NodeUnpublish and NodeUnstage.
func nodeUnpublish(t *testing.T, volumeID, targetPath string) {
	t.Helper()
	callDriver(t, "NodeUnpublishVolume "+volumeID+" "+targetPath, func(ctx context.Context, c csi.NodeClient) error {
		_, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: targetPath})
		return err
	})
}

func callDriver(t *testing.T, what string, call func(context.Context, csi.NodeClient) error) {
	t.Helper()
	sock := filepath.Join(needCluster(t).Layout.KubeletRoot(), "plugins", cluster.CSIDriverName, "csi.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err, "dial the CSI driver at %s", sock)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(suite.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, call(ctx, csi.NewNodeClient(conn)), what)
	t.Logf("%s done through the driver", what)
}
