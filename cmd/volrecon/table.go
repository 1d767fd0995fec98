package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/volrecon/volrecon/reconstruct"
)

// printTable prints the State for a person: volumes grouped by pod, then
// the global mounts and the findings, then one summary line.
func printTable(out io.Writer, st *reconstruct.State) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	byPod := map[string][]reconstruct.Volume{}
	for _, v := range st.Volumes {
		byPod[v.PodUID] = append(byPod[v.PodUID], v)
	}
	for _, p := range st.Pods {
		// A line without tabs ends a column block: each pod aligns on its own.
		fmt.Fprintf(w, "pod %s (%s, %s)\n", p.UID, p.Status, plural(len(p.MountPoints), "mount point"))
		fmt.Fprintf(w, "  VOLUME\tPLUGIN\tSTATE\tDRIVER\tDEVICE MOUNT PATH\n")
		for _, v := range byPod[p.UID] {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", v.Name, v.Plugin, v.State, driverOf(v), v.DeviceMountPath)
		}
	}
	if len(st.GlobalMounts) > 0 {
		fmt.Fprintf(w, "\nGLOBAL MOUNT\tSTATE\tDRIVER\tPODS\t\n")
		for _, g := range st.GlobalMounts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t\n", g.Path, g.State, g.DriverName, len(g.PodUIDs))
		}
	}
	if len(st.Findings) > 0 {
		fmt.Fprintf(w, "\nFINDING\tSEVERITY\tPATH\tMESSAGE\t\n")
		for _, f := range st.Findings {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", f.Kind, f.Severity, f.Path, f.Message)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\n%s\n", summary(st))
	return err
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func driverOf(v reconstruct.Volume) string {
	if v.CSI == nil {
		return ""
	}
	return v.CSI.DriverName
}

func summary(st *reconstruct.State) string {
	table := "mount table consistent"
	if !st.MountTable.Consistent {
		table = "MOUNT TABLE NOT CONSISTENT: every state is Uncertain"
	}
	return fmt.Sprintf("%d pods, %d volumes, %d global mounts, %d volumes in use, %d findings; %s (%s, %d entries)",
		len(st.Pods), len(st.Volumes), len(st.GlobalMounts), len(st.VolumesInUse), len(st.Findings),
		table, st.MountTable.Path, st.MountTable.Entries)
}
