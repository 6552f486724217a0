//! clusterloader2 (CL2) test configs, run unmodified: its template language ([`gotmpl`]).
pub mod gotmpl;
