//! Compiles mcpvm's own host seccomp filters (src/host/seccomp_lists.rs:
//! its relays, channels, host files, inbound connections and egress
//! proxy) into BPF when mcpvm is built, as vmm/build.rs does the VMM's.

#[allow(dead_code)]
mod lists {
    include!("src/host/seccomp_lists.rs");
}

fn main() {
    println!("cargo:rerun-if-changed=src/host/seccomp_lists.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let lists: Vec<_> = lists::HOST_THREADS.iter().map(|k| k.list()).collect();
    seccomp_lists::write_programs(&lists);
}
