#![no_std]
//! Empty library target: lets the loader name this crate as a build-dependency, so cargo
//! rebuilds the loader when the eBPF sources change.
