package io.opentelemetry.sdk.trace;

import io.opentelemetry.context.Context;

/**
 * Stand-in for the OpenTelemetry SDK's SpanProcessor, with the same four
 * methods the SDK calls: onStart on the thread starting a span, onEnd on
 * the thread ending it.
 */
public interface SpanProcessor {
    void onStart(Context parentContext, ReadWriteSpan span);

    boolean isStartRequired();

    void onEnd(ReadableSpan span);

    boolean isEndRequired();
}
