//! mcpvm's guest agent: PID 1 inside the microVM.
//!
//! It brings the guest up (pseudo filesystems), tells the VMM through the
//! boot timer that userspace is running, and mounts the root image the
//! kernel command line names (`root.rs`). With `mcpvm.channel=vsock` the
//! host drives the run (`run.rs`: run spec in over vsock, the server
//! spawned under its policy, its stdio relayed, events out). Without it,
//! the agent runs the command given after `--` on the kernel command line
//! (boot tests). Either way the VM powers off with the command's exit
//! status (`exit.rs`). What it agrees on with the host is the
//! `mcpvm-protocol` crate.

mod canaries;
mod egress;
mod exit;
mod inbound;
mod links;
mod ports;
mod root;
mod session;
mod system;
mod tail;
mod user;
mod vsock;
mod withholding;
mod workspace;

use std::process::Command;

use mcpvm_protocol::boot_args::BootArgs;

fn run() -> u8 {
    if let Err(e) = system::mount_pseudo_filesystems() {
        eprintln!("mcpvm-agent: {e}");
        return 1;
    }
    if let Err(e) = ports::signal_boot() {
        eprintln!("mcpvm-agent: cannot reach the boot timer port: {e}");
    }
    println!(
        "mcpvm-agent: up: {} CPUs online, {} MiB memory",
        system::cpus_online().map_or("?".into(), |n| n.to_string()),
        system::memory_mib().map_or("?".into(), |n| n.to_string()),
    );
    // The kernel does not pass dotted parameters to init: read them from
    // /proc.
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let boot = BootArgs::parse(&cmdline);
    if let Some(spec) = &boot.root {
        if let Err(e) = root::enter(spec) {
            eprintln!(
                "mcpvm-agent: cannot use {} as the root filesystem: {e}",
                spec.device
            );
            return 1;
        }
    }
    // The host drives the run over vsock (`mcpvm run`).
    if boot.vsock_channel {
        return match session::run_over_vsock() {
            Ok(status) => status,
            Err(e) => {
                eprintln!("mcpvm-agent: {e}");
                126
            }
        };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((program, rest)) = args.split_first() else {
        return 0;
    };
    match Command::new(program)
        .args(rest)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .status()
    {
        Ok(status) => {
            println!("mcpvm-agent: {program} exited: {status}");
            exit::Exit::of(status).byte()
        }
        Err(e) => {
            eprintln!("mcpvm-agent: cannot run {program}: {e}");
            127
        }
    }
}

fn main() {
    if std::process::id() != 1 {
        eprintln!("mcpvm-agent: this is the guest's PID 1; it runs inside an mcpvm microVM, not on the host");
        std::process::exit(2);
    }
    let status = run();
    // Console writes return once the bytes are in the tty buffer; the UART
    // sends them later, on interrupts. Powering off before that loses the
    // last lines (seen in the boot tests), so wait for the transmitter.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // SAFETY: tcdrain on our own stdout/stderr fds; fails harmlessly if
    // they are not terminals.
    unsafe {
        libc::tcdrain(1);
        libc::tcdrain(2);
    }
    let err = ports::power_off(status);
    eprintln!("mcpvm-agent: cannot power off: {err}");
    // PID 1 must not exit (the kernel would panic); wait for the VMM.
    loop {
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_match_the_vmm_layout() {
        use vmm::arch::x86_64::layout;
        use vmm::devices::boot_timer;
        assert_eq!(ports::BOOT_TIMER_PORT, layout::BOOT_TIMER_PORT);
        assert_eq!(ports::POWER_PORT, layout::POWER_PORT);
        assert_eq!(ports::BOOT_TIMER_MAGIC, boot_timer::BOOT_TIMER_MAGIC);
    }
}
