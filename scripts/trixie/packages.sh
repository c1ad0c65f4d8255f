# Sourced: prints the package names of a list file, without comments or blank lines.
trixie_packages() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$1"; }
