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
	sock := filepath.Join(needCluster(t).Layout.KubeletRoot(), "plugins", cluster.CSIDriverName, "csi.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err, "dial the CSI driver at %s", sock)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(suite.ctx, 30*time.Second)
	defer cancel()
	_, err = csi.NewNodeClient(conn).NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: volumeID, StagingTargetPath: stagingPath})
	require.NoError(t, err, "NodeUnstageVolume %s %s", volumeID, stagingPath)
	t.Logf("NodeUnstageVolume %s done through the driver", volumeID)
}
