//! x86_64 specifics: guest layout, boot structures and initial CPU state.

pub mod boot_params;
pub mod cpuid;
pub mod gdt;
pub mod layout;
pub mod mptable;
pub mod msr;
pub mod regs;
