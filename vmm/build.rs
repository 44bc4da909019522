//! Compiles the VMM's host seccomp filters (src/host_seccomp/lists.rs)
//! into BPF when the VMM is built: every thread kind, trapping (`--seccomp
//! on`) and logging (`--seccomp log`), with a placeholder for the
//! process's pid that `host_seccomp::program` writes in at run time.

#[allow(dead_code)]
mod lists {
    include!("src/host_seccomp/lists.rs");
}

fn main() {
    println!("cargo:rerun-if-changed=src/host_seccomp/lists.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let lists: Vec<_> = lists::KINDS.iter().map(|k| k.list()).collect();
    seccomp_lists::write_programs(&lists);
}
