package csinode

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The kubelet's plugin-registration API (pluginregistration.v1), of which
// only GetInfo is needed. It is described here rather than imported: the
// module that holds its generated code, k8s.io/kubelet, would bring the
// kubelet's module graph (component-base, cobra, otel…) into ours for four
// string fields. The wire format is checked in the tests against bytes the
// generated code produces.
const (
	getInfoMethod = "/pluginregistration.Registration/GetInfo"
	// csiPluginType is PluginInfo.type of a CSI driver ("CSIPlugin").
	csiPluginType = "CSIPlugin"
)

// pluginInfoDesc describes
//
//	message PluginInfo { string type = 1; string name = 2; string endpoint = 3; repeated string supported_versions = 4; }
//
// InfoRequest has no fields, so it is encoded as google.protobuf.Empty.
var pluginInfoDesc = mustPluginInfoDesc()

func mustPluginInfoDesc() protoreflect.MessageDescriptor {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	field := func(name string, n int32, label *descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: str, Label: label}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("volrecon/csinode/pluginregistration.proto"),
		Package: proto.String("pluginregistration"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("PluginInfo"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("type", 1, opt), field("name", 2, opt), field("endpoint", 3, opt), field("supported_versions", 4, rep),
			},
		}},
	}, nil)
	if err != nil {
		panic(err) // a constant descriptor: only a programming error gets here
	}
	return fd.Messages().ByName("PluginInfo")
}

// pluginInfo is what a registration socket answers to GetInfo.
type pluginInfo struct {
	Type, Name, Endpoint string
	SupportedVersions    []string
}

func decodePluginInfo(m *dynamicpb.Message) pluginInfo {
	f := pluginInfoDesc.Fields()
	info := pluginInfo{
		Type:     m.Get(f.ByNumber(1)).String(),
		Name:     m.Get(f.ByNumber(2)).String(),
		Endpoint: m.Get(f.ByNumber(3)).String(),
	}
	list := m.Get(f.ByNumber(4)).List()
	for i := range list.Len() {
		info.SupportedVersions = append(info.SupportedVersions, list.Get(i).String())
	}
	return info
}

// getInfo asks a registration socket for its PluginInfo.
func getInfo(ctx context.Context, conn *grpc.ClientConn) (pluginInfo, error) {
	resp := dynamicpb.NewMessage(pluginInfoDesc)
	if err := conn.Invoke(ctx, getInfoMethod, &emptypb.Empty{}, resp); err != nil {
		return pluginInfo{}, fmt.Errorf("GetInfo: %w", err)
	}
	return decodePluginInfo(resp), nil
}
