/**
 * The Java client's conformance agent (test/conformance/PROTOCOL.md), on the
 * client's public API only.
 */
package io.fencer.conformance;
