//! System call names as the agent reports them: the table's name, or
//! `syscall_N` for a number it does not know.

use syscall_table as syscalls;

pub fn name(nr: u32) -> String {
    syscalls::name(nr)
        .map(str::to_string)
        .unwrap_or_else(|| format!("syscall_{nr}"))
}
