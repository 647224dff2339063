package registrysync

import "syscall"

// setDeathSignal has the kernel SIGKILL the child when this process dies without stopping it
// (killed outright, SIGKILL or the OOM killer): a stdio server that outlives its stdin
// would otherwise be left running, and a second copy started next to it by the next start.
// A parent-death signal reaches the child only, not what it started itself (npx → node): those
// see their stdin close, as before. (The kernel sends it when the thread that started the child
// ends; Go ends a thread only when a goroutine locked to it ends locked, which nothing here
// does.)
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
