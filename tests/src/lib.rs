//! e2e fixtures
