package io.fencer.client;

/**
 * CheckResult says whether a token is a lock's current grant: {@code token}
 * is the lock's exclusive grant's (0 when free or held shared), {@code mode}
 * the asked token's grant's mode when it is current.
 */
public record CheckResult(boolean current, long token, String mode) {
}
