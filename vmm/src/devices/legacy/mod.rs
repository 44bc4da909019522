//! PC devices a Linux guest expects on fixed ports: the COM1 UART for the
//! console and the i8042 controller whose reset line ends the VM.

pub mod i8042;
pub mod serial;
