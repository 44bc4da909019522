//! Compiles the host seccomp filters (src/host_seccomp/lists.rs) into BPF
//! when the VMM is built: every thread kind, trapping (`--seccomp on`)
//! and logging (`--seccomp log`), with a placeholder for the process's
//! pid that `host_seccomp::program` writes in at run time.

use std::fmt::Write;

#[allow(dead_code)]
mod lists {
    include!("src/host_seccomp/lists.rs");
}

fn main() {
    println!("cargo:rerun-if-changed=src/host_seccomp/lists.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let mut out = String::from(
        "/// The host seccomp filters as vmm/build.rs compiled them: [kind, in\n\
         /// `KINDS` order][0: trap, 1: log], as (code, jt, jf, k).\n\
         const PROGRAMS: [[&[(u16, u8, u8, u32)]; 2]; 12] = [\n",
    );
    for kind in lists::KINDS {
        out += "    [\n";
        for action in [
            seccompiler::SeccompAction::Trap,
            seccompiler::SeccompAction::Log,
        ] {
            let filter = lists::filter(kind, action, lists::PID_PLACEHOLDER)
                .unwrap_or_else(|e| panic!("host seccomp: {e}"));
            let program = seccompiler::BpfProgram::try_from(filter)
                .unwrap_or_else(|e| panic!("host seccomp: the {} filter: {e}", kind.name()));
            out += "        &[";
            for i in &program {
                write!(out, "({}, {}, {}, {:#x}), ", i.code, i.jt, i.jf, i.k).unwrap();
            }
            out += "],\n";
        }
        out += "    ],\n";
    }
    out += "];\n";
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("seccomp_programs.rs");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
